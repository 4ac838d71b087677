"""`cookbook image` and lint against hostile recipe paths (issue 48, item 3): image.dockerfile and
image.port stay inside the checkout (links resolved), the context carries regular files only and
never follows a link out of the recipe or port folders, a FIFO is refused rather than waited on,
over-long names are one diagnostic, and --tag/--base are image references, quoted in the printed
`docker build` line.

Each case runs the real CLI against a small checkout of its own (COOKBOOK_ROOT): the CPU recipe,
the ports, the base definitions and the fix pack, copied from this one."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cookbook.cli import main
from cookbook.errors import CookbookError
from cookbook.image import context, reference
from cookbook.recipe.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]
SLUG = "gemma3-270m-cpu"
SECRET = "host secret: must never reach an image context"


@pytest.fixture
def checkout(tmp_path):
    root = tmp_path / "checkout"
    for rel in ("pyproject.toml", "README.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, root / rel)
    for rel in ("ports", "docker", "fixes", "schema"):
        shutil.copytree(ROOT / rel, root / rel, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "recipes" / SLUG, root / "recipes" / SLUG, ignore=shutil.ignore_patterns("evidence"))
    (tmp_path / "secret").write_text(SECRET)
    return root


def _cli(root: Path, *args, process=False):
    """The CLI against `root`, in this process (a new one costs about a second on 2 cores), or
    with `process` in a process of its own under a timeout: where a FIFO would block a regression."""
    if process:
        env = dict(os.environ, COOKBOOK_ROOT=str(root), COLUMNS="200")
        env.pop("COOKBOOK_RECIPES", None)
        return subprocess.run(
            [sys.executable, "-m", "cookbook.cli", *args], capture_output=True, text=True, env=env, timeout=60
        )
    r = CliRunner().invoke(
        main, list(args), env={"COOKBOOK_ROOT": str(root), "COLUMNS": "200", "COOKBOOK_RECIPES": None}
    )
    stderr = r.stderr
    if r.exception is not None and not isinstance(r.exception, SystemExit):  # as a process would print it
        stderr += "".join(traceback.format_exception(*r.exc_info))
    return subprocess.CompletedProcess(["cookbook", *args], r.exit_code, r.stdout, stderr)


def _set_image(root: Path, **values) -> Path:
    path = root / "recipes" / SLUG / "recipe.yaml"
    data = yaml.safe_load(path.read_text())
    data["image"].update(values)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _refused(root: Path, lint_says: str, process=False):
    lint = _cli(root, "lint", str(root / "recipes" / SLUG / "recipe.yaml"), process=process)
    assert lint.returncode == 1, lint.stdout + lint.stderr
    assert "Traceback" not in lint.stderr
    assert lint_says in lint.stdout, lint.stdout
    dry = _cli(root, "image", SLUG, "--dry-run", process=process)
    assert dry.returncode == 2, dry.stdout + dry.stderr
    assert "Traceback" not in dry.stderr and dry.stderr.count("error:") == 1, dry.stderr
    assert "root:x:0" not in dry.stdout and SECRET not in dry.stdout
    return lint, dry


@pytest.mark.parametrize(
    "dockerfile, says",
    [
        ("../../../../../../../../etc/passwd", "leaves"),
        ("/etc/passwd", "absolute path"),
        ("ports/cpu/../../../secret", "leaves"),
        ("ports/cpu/" + "D" * 5000, "too long"),
        ("ports/" + "d/" * 600 + "Dockerfile", "too long"),
    ],
)
def test_a_dockerfile_outside_the_checkout_is_refused(checkout, dockerfile, says):
    _set_image(checkout, dockerfile=dockerfile)
    _refused(checkout, f"R018 image.dockerfile: {dockerfile[:40]}")
    assert says in _cli(checkout, "image", SLUG, "--dry-run").stderr


def test_a_dockerfile_linked_out_of_the_checkout_is_refused(checkout):
    (checkout / "ports" / "cpu" / "Dockerfile.link").symlink_to(checkout.parent / "secret")
    _set_image(checkout, dockerfile="ports/cpu/Dockerfile.link")
    _refused(checkout, "leaves")


def test_a_fifo_dockerfile_is_refused_not_waited_on(checkout):
    os.mkfifo(checkout / "ports" / "cpu" / "Dockerfile.fifo")
    _set_image(checkout, dockerfile="ports/cpu/Dockerfile.fifo")
    _refused(checkout, "FIFO", process=True)


@pytest.mark.parametrize("port", ["../../..", "../../../tmp", "cpu/../..", "/etc", "P" * 5000, "..", "cpu/"])
def test_a_port_that_is_not_a_folder_under_ports_is_refused(checkout, port):
    _set_image(checkout, port=port)
    lint, _ = _refused(checkout, "R018 image.port")
    assert lint.stdout.count("R018") == 1


def test_a_port_linked_out_of_ports_is_refused(checkout, tmp_path):
    outside = tmp_path / "elsewhere"
    shutil.copytree(checkout / "ports" / "cpu", outside)
    (checkout / "ports" / "linked").symlink_to(outside)
    _set_image(checkout, port="linked")
    _refused(checkout, "leaves")


@pytest.mark.parametrize("where", ["ports/cpu", f"recipes/{SLUG}"])
@pytest.mark.parametrize("kind", ["file link", "folder link", "fifo"])
def test_links_and_fifos_in_the_copied_folders_are_refused(checkout, tmp_path, where, kind):
    target = checkout / where / "leak"
    if kind == "file link":
        target.symlink_to(tmp_path / "secret")
    elif kind == "folder link":
        target.symlink_to(tmp_path)
    else:
        os.mkfifo(target)
    dry = _cli(checkout, "image", SLUG, "--dry-run", process=kind == "fifo")
    assert dry.returncode == 2, dry.stdout + dry.stderr
    assert f"{where}/leak: is a" in dry.stderr and "regular files only" in dry.stderr
    assert "Traceback" not in dry.stderr and SECRET not in dry.stdout


def test_a_file_swapped_for_a_link_after_the_plan_is_not_followed(checkout, tmp_path, monkeypatch):
    monkeypatch.setenv("COOKBOOK_ROOT", str(checkout))
    monkeypatch.delenv("COOKBOOK_RECIPES", raising=False)
    p = context.plan(resolve(SLUG), root=checkout)
    victim = checkout / "ports" / "cpu" / "install.sh"
    assert f"cookbook/ports/cpu/{victim.name}" in p.files
    victim.unlink()
    victim.symlink_to(tmp_path / "secret")
    dest = tmp_path / "context"
    with pytest.raises(CookbookError, match="is a symbolic link"):
        context.write(p, dest)
    assert not dest.exists()  # nothing half-written


# --- --tag, --base and the printed build line -------------------------------------------------------

VALID = [
    "cookbook/gemma3-270m-cpu:dev",
    "ubuntu",
    "registry.example:5000/team/image:1.0",
    "localhost/a__b/c-d:v_1.2-x",
    "vllm/vllm-openai@sha256:" + "a" * 64,
    "[::1]:5000/x:y",
]
INVALID = [
    "x; rm -rf ~",
    "$(touch /tmp/pwned)",
    "Upper/Case",
    "a:b:c",
    "a b",
    "-t",
    "image:" + "t" * 129,
    "a" * 256,
    "x\n--build-arg",
    "",
    "name:tag@sha256:short",
]


@pytest.mark.parametrize("ref", VALID)
def test_valid_references_are_accepted(ref):
    assert reference.problem(ref) is None


@pytest.mark.parametrize("ref", INVALID)
def test_a_text_that_is_not_an_image_reference_is_refused(ref):
    assert reference.problem(ref) is not None
    with pytest.raises(CookbookError, match="^--tag "):
        reference.check(ref, "--tag")


@pytest.mark.parametrize("option", ["--tag", "--base"])
def test_the_cli_refuses_a_tag_or_base_that_is_not_an_image_reference(checkout, option):
    done = _cli(checkout, "image", SLUG, "--dry-run", option, "x; rm -rf ~")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: {option} x; rm -rf ~: is not an image reference"), done.stderr
    assert "help: give" in done.stderr and "Traceback" not in done.stderr


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80) | st.from_regex(reference.REFERENCE, fullmatch=True))
def test_anything_accepted_as_a_reference_is_one_inert_shell_word(ref):
    if reference.problem(ref) is None:
        assert set(ref) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-:/@[]+")
        assert shlex.split(ref) == [ref] and not ref.startswith("-")


def test_the_printed_build_line_quotes_tag_and_context(checkout, monkeypatch):
    monkeypatch.setenv("COOKBOOK_ROOT", str(checkout))
    p = context.plan(resolve(SLUG), tag="cookbook/x:dev", root=checkout)
    odd = "ctx dir; $(echo pwned)"
    words = shlex.split(p.build_command(odd))
    assert words[:3] == ["docker", "build", "-t"] and words[3] == "cookbook/x:dev" and words[-1] == odd
    dry = _cli(checkout, "image", SLUG, "--dry-run", "--tag", "registry.example:5000/team/image:1.0")
    line = next(ln for ln in dry.stdout.splitlines() if ln.startswith("docker build"))
    assert shlex.split(line)[3] == "registry.example:5000/team/image:1.0"


@pytest.mark.parametrize("name", ["../../outside", "../kernels/../../outside", "/abs"])
def test_a_kernel_name_that_climbs_out_never_reaches_the_context(checkout, tmp_path, name):
    """`kernels/<name>/build.sh` is copied into the context: a name with `..` would read a host folder
    and write outside the context folder."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "build.sh").write_text(SECRET)
    _set_image(checkout, kernels=[{"name": name, "variant": "glm"}])
    lint = _cli(checkout, "lint", str(checkout / "recipes" / SLUG / "recipe.yaml"))
    assert lint.returncode == 1 and "R016" in lint.stdout and "Traceback" not in lint.stderr
    dry = _cli(checkout, "image", SLUG, "--dry-run")
    assert dry.returncode == 2 and "not a path inside the image's context" in dry.stderr, dry.stderr
    assert SECRET not in dry.stdout and "Traceback" not in dry.stderr


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=300)
    | st.lists(st.sampled_from(["..", ".", "ports", "cpu", "Dockerfile", "", "/", "a" * 300]), max_size=8).map("/".join)
)
def test_any_dockerfile_or_port_text_is_judged_without_crashing_and_kept_inside(text):
    from cookbook.recipe.checks_paths import dockerfile_problem, port_problem

    for problem, base in ((dockerfile_problem, ROOT), (port_problem, ROOT / "ports")):
        why = problem(ROOT, text)
        assert why is None or isinstance(why, str)
        if why is None:
            assert (base / text).resolve().is_relative_to(ROOT.resolve())
