"""Property tests of recipe/shell.py against bash itself, and of the names the schema lets
into the launch block; plus `bash -n` on the block of every real recipe and quant."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from shell_helpers import base_recipe, run_block, stub_bin, stub_calls, write_recipe

from cookbook.recipe import errors as E
from cookbook.recipe import shell
from cookbook.recipe.model import ENV_NAME, FLAG_KEY, ITEM_NAME, Recipe

# Lowercase names only: bash's own variables are uppercase ($_, $PWD, $RANDOM), and a
# name from these letters is one the test environment defines or leaves unset.
HOSTILE = "abxyP01$${}{}()`'\"\\!;&|<>*?[]~#@:-=,./%+^ \u00e9\t\n\x1b\u202e"
hostile_text = st.text(alphabet=HOSTILE, max_size=24)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _env(sentinel: Path) -> dict[str, str]:
    # Values hold command substitutions as text (no blanks or glob characters, so bash's
    # splitting of a bare reference is moot); any evaluation creates the sentinel.
    return {"a": f"a$(touch${{IFS%?}}{sentinel})b", "b": f"`touch${{IFS%?}}{sentinel}`", "x": "plain"}


class _Unset(dict):
    def __contains__(self, key):
        return True

    def __getitem__(self, key):
        return self.get(key, "")


@SETTINGS
@given(text=hostile_text)
def test_a_quoted_word_is_one_argument_bash_expands_as_expand_says(text):
    if shell.control_char(text):
        with pytest.raises(shell.UnsafeText):
            shell.quote(text)
        return
    with tempfile.TemporaryDirectory() as tmp:
        sentinel = Path(tmp) / "PWNED"
        env = _env(sentinel)
        word = shell.quote(text)
        p = subprocess.run(
            ["bash", "-c", f"printf '%s\\0' {word}"],
            cwd=tmp,
            capture_output=True,
            env={"PATH": os.environ["PATH"], **env},
        )
        assert not sentinel.exists(), word
        assert p.returncode == 0, (word, p.stderr)
        assert p.stdout.decode().split("\0")[:-1] == [shell.expand(text, _Unset(env))], word


@SETTINGS
@given(text=hostile_text)
def test_only_plain_references_stay_unquoted(text):
    if shell.control_char(text):
        return
    word = shell.quote(text)
    # Outside single quotes, a `$` may only start $name, ${name} or ${name:-…}.
    outside = re.sub(r"'[^']*'|\"'\"", "", word)  # shlex.quote writes a ' as '"'"'
    for m in re.finditer(r"\$", outside):
        assert re.match(r"\$(\{[A-Za-z_][A-Za-z0-9_]*(\}|:-)|[A-Za-z_])", outside[m.start() :]), word
    assert not set(outside) & set('`;&|<>*?[]~#!()"\\ \t\n'), word
    assert shell.is_bare(text) == (word == text)


def _resolved_or_refused(tmp: Path, data: dict, quant: str | None = None):
    from cookbook.recipe.resolve import resolve

    write_recipe(tmp / "recipes", data)
    old = os.environ.get("COOKBOOK_RECIPES")
    os.environ["COOKBOOK_RECIPES"] = str(tmp / "recipes")
    try:
        return resolve(data["name"], quant)
    except E.RecipeError as exc:
        return exc
    finally:
        if old is None:
            os.environ.pop("COOKBOOK_RECIPES")
        else:
            os.environ["COOKBOOK_RECIPES"] = old


def _run_no_shell(tmp: Path, resolved, sentinel: Path) -> list[list[str]]:
    from cookbook.plan.launch_block import launch_block

    bin_dir, calls = stub_bin(tmp)
    p = run_block(launch_block(resolved), tmp, bin_dir, calls)
    assert not sentinel.exists()
    assert p.returncode == 0, p.stderr
    return stub_calls(calls)


@SETTINGS
@given(name=hostile_text, value=hostile_text)
def test_env_names_are_names_or_refused_stub_server(name, value):
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        sentinel = tmp / "PWNED"
        data = base_recipe("hostile", sentinel)
        data["env"][name] = value
        got = _resolved_or_refused(tmp, data)
        if isinstance(got, E.RecipeError):
            assert {d.kind for d in got.diagnostics} <= {E.BAD_NAME, E.SHELL_CONTROL_CHAR}, str(got)
            assert re.fullmatch(ENV_NAME, name) is None or shell.control_char(value), str(got)
            return
        assert re.fullmatch(ENV_NAME, name)
        _run_no_shell(tmp, got, sentinel)


@SETTINGS
@given(key=hostile_text, value=hostile_text)
def test_flag_keys_are_flag_names_or_refused_stub_server(key, value):
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        sentinel = tmp / "PWNED"
        data = base_recipe("hostile", sentinel)
        data["serve"]["args"][key] = value
        got = _resolved_or_refused(tmp, data)
        if isinstance(got, E.RecipeError):
            assert re.fullmatch(FLAG_KEY, key) is None or shell.control_char(value), str(got)
            return
        assert re.fullmatch(FLAG_KEY, key)
        calls = _run_no_shell(tmp, got, sentinel)
        flag = "--" + key.replace("_", "-")
        assert flag in calls[-1]


@SETTINGS
@given(quant=hostile_text, profile=hostile_text, opt=hostile_text)
def test_quant_and_fix_names_are_names_or_refused_stub_server(quant, profile, opt):
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        sentinel = tmp / "PWNED"
        data = base_recipe("hostile", sentinel)
        data["quants"] = {quant: {"default": True, "min_gpus": 0}}
        data["image"]["fixes"].update(profile=profile, opt_in=[{"name": opt}])
        got = _resolved_or_refused(tmp, data)
        ok = all(re.fullmatch(ITEM_NAME, n) for n in (quant, profile, opt))
        if isinstance(got, E.RecipeError):
            assert not ok, str(got)
            assert {d.kind for d in got.diagnostics} <= {E.BAD_NAME}, str(got)
            return
        assert ok
        calls = _run_no_shell(tmp, got, sentinel)
        assert calls[0][2:] == ["--check", "--profile", profile, opt]


@SETTINGS
@given(value=hostile_text)
def test_set_values_reach_argv_as_text_stub_server(value):
    import json

    from cookbook.recipe.resolve import resolve

    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        sentinel = tmp / "PWNED"
        write_recipe(tmp / "recipes", base_recipe("hostile", sentinel))
        os.environ["COOKBOOK_RECIPES"] = str(tmp / "recipes")
        try:
            try:
                resolved = resolve("hostile", sets=[f"served_model_name={json.dumps(value)}"])
            except E.RecipeError as exc:
                assert shell.control_char(value), str(exc)
                assert [d.kind for d in exc.diagnostics] == [E.BAD_SET]
                return
        finally:
            os.environ.pop("COOKBOOK_RECIPES")
        argv = _run_no_shell(tmp, resolved, sentinel)[-1]
        env = _Unset({"HOSTILE": resolved.recipe.env["HOSTILE"].value, "PWD": str(tmp)})
        assert argv[argv.index("--served-model-name") + 1] == shell.expand(value, env)


def _every_real_block():
    from cookbook.recipe.chain import all_slugs, load_chain, merge_chain

    os.environ.pop("COOKBOOK_RECIPES", None)
    out = []
    for slug in all_slugs():
        data = merge_chain(load_chain(slug))
        if data.get("abstract"):
            continue
        quants = list(data.get("quants") or {}) or [None]
        out += [(slug, q) for q in quants]
    return out


@pytest.mark.parametrize("slug,quant", _every_real_block())
def test_every_real_recipe_block_parses_in_bash(slug, quant, monkeypatch):
    from cookbook.plan.launch_block import launch_block
    from cookbook.recipe.resolve import resolve

    monkeypatch.delenv("COOKBOOK_RECIPES", raising=False)
    try:
        resolved = resolve(slug, quant)
    except E.RecipeError as exc:  # a quant this recipe refuses (too few GPUs): nothing to render
        assert {d.kind for d in exc.diagnostics} <= {E.QUANT_TOO_FEW_GPUS, E.RULE_REFUSED}, str(exc)
        return
    block = launch_block(resolved)
    p = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for text in (block, launch_block(resolved, comments=False)):
        assert shell.control_char(text.replace("\n", "")) is None


def test_schema_patterns_match_the_model():
    """The patterns land in the generated schema (editors refuse what resolve refuses)."""
    import json

    from cookbook.recipe.model import json_schema

    schema = json.dumps(json_schema())
    for pattern in (ENV_NAME, FLAG_KEY, ITEM_NAME, shell.NO_CONTROL):
        assert json.dumps(pattern) in schema
    with pytest.raises(ValidationError):
        Recipe.model_validate({**base_recipe("x", Path("/s")), "extends": "../y"})
