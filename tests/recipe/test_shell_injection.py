"""Nothing a recipe or a --set holds runs as shell: hostile recipes (in tmp dirs, through
COOKBOOK_RECIPES) and --set values, executed through the printed launch block and through
`cookbook serve`, with the server binary and python3 replaced by an argv-recording stub
(`_stub_server` in a test's name says so). Every payload tries to create a sentinel file.

Each case is either refused with one diagnostic (stable ID, file:line:col, help) or runs with
the sentinel absent and the stub receiving exactly the recipe's argv, the payload as text.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from shell_helpers import (
    base_recipe,
    one_payload_per_class,
    payloads,
    run_block,
    stub_bin,
    stub_calls,
    with_,
    write_recipe,
)

from cookbook.plan.launch_block import launch_block, planned
from cookbook.recipe import errors as E
from cookbook.recipe import shell
from cookbook.recipe.launch import server_argv
from cookbook.recipe.resolve import resolve

SENTINEL_NAME = "PWNED"
PAYLOADS = payloads(Path("/SENTINEL-DIR") / SENTINEL_NAME)
PER_CLASS = one_payload_per_class(Path("/SENTINEL-DIR") / SENTINEL_NAME)


def cases(sites: list) -> list:
    """Each class of payload once at every site, and every payload at the first site (the property
    tests in test_shell_properties.py cover the space between)."""
    crossed = [(site, p) for site in sites for p in PER_CLASS]
    return crossed + [(sites[0], p) for p in PAYLOADS if p not in PER_CLASS]


def _ids(case) -> str:
    site, payload = case
    return f"{site if isinstance(site, str) else site[0]}-{ascii(payload)[1:-1][:40]}"


# Where a hostile text goes: (id, dotted key, as a new key of that mapping?, recipe tweak).
VALUE_SITES = [
    ("env-value", "env.EXTRA", False),
    ("flag-value", "serve.args.served_model_name", False),
    ("new-flag-value", "serve.args.chat_template", False),
    ("model", "serve.model", False),
    ("summary", "summary", False),
    ("launch-script", "image.fixes.launch_script", False),
    ("fix-profile", "image.fixes.profile", False),
    ("opt-in-name", "image.fixes.opt_in.0.name", False),
    ("convert-arg", "convert.0.args.1", False),
    ("convert-creates", "convert.0.creates", False),
    ("convert-tool", "convert.0.tool", False),
    ("interpreter", "serve.python", False),
]
NAME_SITES = [("env-name", "env", True), ("flag-key", "serve.args", True), ("quant-name", "quants", True)]
SERVED_SITES = [s for s in VALUE_SITES if s[0] not in ("convert-tool",)]


def _hostile(tmp_path: Path, site: tuple, payload: str) -> tuple[str, Path, str | None, str]:
    """Write the hostile recipe; (slug, sentinel, quant to choose, the text as the recipe holds it)."""
    sentinel = tmp_path / SENTINEL_NAME
    payload = payload.replace("/SENTINEL-DIR/" + SENTINEL_NAME, str(sentinel))
    name, dotted, as_key = site
    data = base_recipe("hostile", sentinel)
    if name == "interpreter":
        data["serve"]["command"] = "api-server"
    quant = None
    if as_key and dotted == "quants":
        data["quants"][payload] = {"min_gpus": 0}
    else:
        data = with_(data, dotted, payload, as_key)
    path = write_recipe(tmp_path / "recipes", data)
    # What the recipe holds once YAML has read it (YAML folds some line breaks, e.g. NEL).
    loaded = yaml.safe_load(path.read_text())
    if as_key:
        [held] = set(_at(loaded, dotted)) - set(_at(base_recipe("hostile", sentinel), dotted))
    else:
        held = _at(loaded, dotted)
    if as_key and dotted == "quants":
        quant = held
    return "hostile", sentinel, quant, held


def _at(data, dotted: str):
    for p in dotted.split("."):
        data = data[int(p)] if isinstance(data, list) else data[p]
    return data


def _assert_one_clear_refusal(exc: E.RecipeError, held: str, site: tuple) -> None:
    assert exc.diagnostics
    for d in exc.diagnostics:
        text = d.render()
        assert re.match(r"^\S+recipe\.yaml:\d+:\d+: R\d{3} ", text), text
        assert "\n  help: " in text, text
    kinds = {d.kind for d in exc.diagnostics}
    if site in NAME_SITES or site[0] in ("convert-tool", "interpreter", "fix-profile", "opt-in-name"):
        assert kinds == {E.BAD_NAME}, str(exc)
    elif shell.control_char(held):
        assert kinds == {E.SHELL_CONTROL_CHAR}, str(exc)


def _expected_calls(resolved, env: dict[str, str]) -> list[list[str]]:
    """What the stubs must receive: the fix-pack line (when rendered), then the server argv,
    with plain references expanded as bash expands them and everything else as written."""
    calls = []
    fixes = resolved.recipe.image.fixes
    if fixes.profile:
        script = fixes.launch_script
        if shell.quote_word(script) == script and script.startswith('"'):
            script = script[1:-1]
        calls.append(
            ["python3", shell.expand(script, env), "--check", "--profile", fixes.profile]
            + [f.name for f in fixes.opt_in]
        )
    argv = [shell.expand(t, env) for t in server_argv(resolved, planned(resolved))]
    argv[0] = os.path.basename(argv[0])
    calls.append(argv)
    return calls


class _Unset(dict):
    """An environment where an unset name reads as empty, as bash (without set -u) reads it."""

    def __contains__(self, key):
        return True

    def __getitem__(self, key):
        return self.get(key, "")


def _block_env(resolved, tmp_path: Path) -> dict[str, str]:
    """The values the block's exports make, by shell.expand (bash is the other side)."""
    from cookbook.recipe.launch import env_items

    env = _Unset({k: v for k, v in os.environ.items() if k not in ("CHECKPOINT_DIR", "COOKBOOK", "HOSTILE")})
    env["PWD"] = str(tmp_path)
    for name, value in env_items(resolved):
        env[name] = shell.expand(value, env)
    return env


@pytest.mark.parametrize(
    ("site", "payload"), cases(VALUE_SITES + NAME_SITES), ids=map(_ids, cases(VALUE_SITES + NAME_SITES))
)
def test_hostile_recipe_launch_block_runs_no_shell_stub_server(tmp_path, monkeypatch, site, payload):
    slug, sentinel, quant, held = _hostile(tmp_path, site, payload)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    monkeypatch.chdir(tmp_path)
    try:
        resolved = resolve(slug, quant)
    except E.RecipeError as exc:
        _assert_one_clear_refusal(exc, held, site)
        return
    assert shell.control_char(held) is None, "a control character was accepted"
    block = launch_block(resolved)
    bin_dir, calls = stub_bin(tmp_path)
    p = run_block(block, tmp_path, bin_dir, calls)
    assert not sentinel.exists(), f"the payload ran:\n{block}"
    assert p.returncode == 0, p.stderr + block
    assert stub_calls(calls) == _expected_calls(resolved, _block_env(resolved, tmp_path)), block


@pytest.mark.parametrize(("site", "payload"), cases(SERVED_SITES), ids=map(_ids, cases(SERVED_SITES)))
def test_hostile_recipe_served_runs_no_shell_stub_server(tmp_path, monkeypatch, site, payload):
    """`cookbook serve`: the exports, each convert step (the converter is a stub too) and the
    launch block, through the CLI. The stub server exits at once, so serve fails after it."""
    from cookbook.cli import main
    from cookbook.serving import local

    slug, sentinel, quant, held = _hostile(tmp_path, site, payload)
    bin_dir, calls = stub_bin(tmp_path)
    for var in ("CHECKPOINT_DIR", "COOKBOOK", "HOSTILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    monkeypatch.setenv("COOKBOOK_ROOT", str(tmp_path))
    monkeypatch.setenv("STUB_CALLS", str(calls))
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "model.gguf"
    monkeypatch.setattr(local, "fetch", lambda resolved: source)
    monkeypatch.setattr(local, "convert_command", lambda: [str(bin_dir / "convert")])
    real_wait = local.wait_ready  # the stub server exits at once: no need to poll for it
    monkeypatch.setattr(local, "wait_ready", lambda server, t: (server.process.wait(), real_wait(server, t)))
    real_env = local.shell_env
    monkeypatch.setattr(
        local, "shell_env", lambda src, *rest: {**real_env(src, *rest), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    )
    res = CliRunner().invoke(main, ["serve", slug, *(["--quant", quant] if quant else [])])
    assert not sentinel.exists(), res.output
    assert "Traceback" not in res.output
    try:
        resolved = resolve(slug, quant)
    except E.RecipeError as exc:
        assert res.exit_code == 2 and "error: cannot serve" in res.output
        _assert_one_clear_refusal(exc, held, site)
        return
    assert res.exit_code == 1 and "exited with code 0 before it was ready" in res.output, res.output
    env = _block_env(resolved, tmp_path)
    conv = resolved.recipe.convert[0]
    convert_env = {**env, "SOURCE_FILE": str(source)}
    expected = [["convert", conv.tool, *(shell.expand(a, convert_env) for a in conv.args)]]
    assert stub_calls(calls) == expected + _expected_calls(resolved, env)


# ---- --set ------------------------------------------------------------------------------

SET_KEYS = [
    "served_model_name",
    "serve.args.chat_template",
    "env.EXTRA",
    "serve.model",
    "summary",
    "image.fixes.launch_script",
    "image.fixes.profile",
]


@pytest.mark.parametrize(("key", "payload"), cases(SET_KEYS), ids=map(_ids, cases(SET_KEYS)))
def test_hostile_set_value_launch_block_runs_no_shell_stub_server(tmp_path, monkeypatch, key, payload):
    sentinel = tmp_path / SENTINEL_NAME
    payload = payload.replace("/SENTINEL-DIR/" + SENTINEL_NAME, str(sentinel))
    write_recipe(tmp_path / "recipes", base_recipe("hostile", sentinel))
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    monkeypatch.chdir(tmp_path)
    # A YAML-quoted value, so the payload reaches the recipe as the text it is.
    item = f"{key}={_yaml_str(payload)}"
    try:
        resolved = resolve("hostile", sets=[item])
    except E.RecipeError as exc:
        assert all(re.match(r"^(\S+:\d+:\d+: )?R\d{3} ", d.render()) and d.help for d in exc.diagnostics)
        if shell.control_char(payload):
            assert [d.kind for d in exc.diagnostics] == [E.BAD_SET], str(exc)
        return
    assert shell.control_char(payload) is None
    block = launch_block(resolved)
    bin_dir, calls = stub_bin(tmp_path)
    p = run_block(block, tmp_path, bin_dir, calls)
    assert not sentinel.exists(), block
    assert p.returncode == 0, p.stderr
    assert stub_calls(calls) == _expected_calls(resolved, _block_env(resolved, tmp_path))


def _yaml_str(text: str) -> str:
    import json

    return json.dumps(text)  # JSON is YAML: a double-quoted scalar


@pytest.mark.parametrize("name", ["A B", "A;touch x", "$(x)", "1A", "A-B", "A\nB", "", "A.B", "A'B"])
def test_set_refuses_env_names_that_are_not_names(tmp_path, monkeypatch, name):
    write_recipe(tmp_path / "recipes", base_recipe("hostile", tmp_path / SENTINEL_NAME))
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    with pytest.raises(E.RecipeError) as info:
        resolve("hostile", sets=[f"env.{name}=1"])
    assert {d.kind for d in info.value.diagnostics} <= {E.BAD_SET, E.UNKNOWN_SET_KEY}, str(info.value)


@pytest.mark.parametrize("key", ["a b", "x;touch", "$(x)", "-x", "a\nb", "a'b", "a`b`"])
def test_set_refuses_flag_keys_that_are_not_flag_names(tmp_path, monkeypatch, key):
    write_recipe(tmp_path / "recipes", base_recipe("hostile", tmp_path / SENTINEL_NAME))
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    with pytest.raises(E.RecipeError) as info:
        resolve("hostile", sets=[f"serve.args.{key}=1"])
    assert [d.kind for d in info.value.diagnostics] == [E.BAD_SET], str(info.value)
    assert ("is not a serve.args key" if "\n" not in key else "control character '\\n'") in str(info.value)


def test_a_refused_name_is_one_message_with_file_line_and_help(tmp_path, monkeypatch):
    data = base_recipe("hostile", tmp_path / SENTINEL_NAME)
    data["env"]["BAD;touch x"] = "1"
    write_recipe(tmp_path / "recipes", data)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    with pytest.raises(E.RecipeError) as info:
        resolve("hostile")
    [d] = info.value.diagnostics
    assert d.kind is E.BAD_NAME and d.key == "env.BAD;touch x"
    assert d.line is not None and d.line > 1
    assert d.render().endswith("help: write it as letters, digits and _, not starting with a digit")


def test_a_newline_in_the_summary_is_refused_at_its_line(tmp_path, monkeypatch):
    data = base_recipe("hostile", tmp_path / SENTINEL_NAME)
    data["summary"] = "x\ntouch PWNED"
    path = write_recipe(tmp_path / "recipes", data)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    with pytest.raises(E.RecipeError) as info:
        resolve("hostile")
    [d] = info.value.diagnostics
    assert d.kind is E.SHELL_CONTROL_CHAR and d.key == "summary" and d.file == path
    assert d.problem == "the value holds the control character '\\n'" and d.line == 3


# ---- extends and slugs: paths never come from file contents ------------------------------


@pytest.mark.parametrize("parent", ["../outside", "/abs/outside", "a/b", "..", ".", "Outside", "linked"])
def test_extends_is_a_slug_inside_recipes_dir(tmp_path, monkeypatch, parent):
    outside = tmp_path / "outside"
    write_recipe(tmp_path, base_recipe("outside", tmp_path / SENTINEL_NAME))  # tmp/outside/recipe.yaml
    (tmp_path / "abs" / "outside").mkdir(parents=True)
    (tmp_path / "abs" / "outside" / "recipe.yaml").write_text((outside / "recipe.yaml").read_text())
    recipes = tmp_path / "recipes"
    (recipes / "linked").parent.mkdir(parents=True, exist_ok=True)
    (recipes / "linked").symlink_to(outside)
    child = base_recipe("child", tmp_path / SENTINEL_NAME)
    child["extends"] = str(tmp_path / "abs" / "outside") if parent == "/abs/outside" else parent
    write_recipe(recipes, child)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(recipes))
    with pytest.raises(E.RecipeError) as info:
        resolve("child")
    [d] = info.value.diagnostics
    assert d.kind is E.EXTENDS_UNKNOWN and d.key == "extends" and d.help, str(info.value)


@pytest.mark.parametrize("slug", ["../outside", str(Path("/tmp")), "a/../outside", "linked"])
def test_a_cli_slug_is_a_folder_inside_recipes_dir(tmp_path, monkeypatch, slug):
    write_recipe(tmp_path, base_recipe("outside", tmp_path / SENTINEL_NAME))
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "linked").symlink_to(tmp_path / "outside")
    monkeypatch.setenv("COOKBOOK_RECIPES", str(recipes))
    with pytest.raises(E.RecipeError) as info:
        resolve(slug)
    assert [d.kind for d in info.value.diagnostics] == [E.UNKNOWN_RECIPE]


def test_lint_and_launch_report_a_hostile_recipe_once_each(tmp_path, monkeypatch):
    from cookbook.cli import main

    data = base_recipe("hostile", tmp_path / SENTINEL_NAME)
    data["env"]["X;touch PWNED"] = "1"
    data["summary"] = "one\ntwo"
    path = write_recipe(tmp_path / "recipes", data)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    lint = CliRunner().invoke(main, ["lint", str(path)])
    assert lint.exit_code == 1
    assert re.search(
        r"recipe\.yaml:\d+:\d+: R021 env\.X;touch PWNED: 'X;touch PWNED' is not an environment "
        r"variable name",
        lint.output,
    ), lint.output
    assert re.search(r"recipe\.yaml:3:\d+: R022 summary: the value holds the control character '\\n'", lint.output)
    launch = CliRunner().invoke(main, ["launch", "hostile"])
    assert launch.exit_code == 2 and "R021" in launch.output and "R022" in launch.output
    assert "export" not in launch.output and "Traceback" not in launch.output
