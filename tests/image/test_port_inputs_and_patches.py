"""A port's named build inputs and patches: a missing input stops its step with the one message
the context carries; port patches need a DEP-3 header and a series entry, the ones the document
names must be there, and they apply with GNU patch at zero fuzz (real patch, real files)."""

import shutil
import subprocess
from pathlib import Path

import pytest

from cookbook.errors import CookbookError
from cookbook.image import context, port_patches, ports
from cookbook.recipe.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]
REQUIRE = ROOT / "ports" / "require-input.sh"


def test_missing_input_stops_with_what_and_where(tmp_path):
    plan = context.plan(resolve("glm52-mxfp4-8x-gaudi2"))
    ctx = context.write(plan, tmp_path / "ctx")
    done = subprocess.run([str(REQUIRE), str(ctx / "inputs" / "glm5_hpu")], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.startswith("error: build input glm5_hpu of ports/glm-5-mxfp4 is missing: the glm5_hpu package")
    assert "help: put it at .cache/image-inputs/glm5_hpu/" in done.stderr
    assert done.stderr.count("error:") == 1


def test_present_input_passes_and_is_in_the_context(tmp_path, monkeypatch):
    root = tmp_path / "root"
    for rel in ("recipes", "fixes", "ports", "docker", "gates", "kernels"):
        shutil.copytree(ROOT / rel, root / rel, ignore=shutil.ignore_patterns("results"))
    for rel in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / rel, root / rel)
    (root / "src").symlink_to(ROOT / "src")
    pkg = root / ports.INPUTS_DIR / "glm5_hpu"
    pkg.mkdir(parents=True)
    (pkg / "pyproject.toml").write_text("[project]\nname = 'glm5_hpu'\n")
    monkeypatch.setenv("COOKBOOK_RECIPES", str(root / "recipes"))
    plan = context.plan(resolve("glm52-mxfp4-8x-gaudi2"), root=root)
    assert "inputs/glm5_hpu/pyproject.toml" in plan.files and "inputs/glm5_hpu/MISSING" not in plan.files
    assert [i.name for i in plan.missing_inputs] == ["glm-5-mxfp4-patches"]
    ctx = context.write(plan, tmp_path / "ctx")
    assert subprocess.run([str(REQUIRE), str(ctx / "inputs" / "glm5_hpu")]).returncode == 0


def test_platform_specific_input_is_not_asked_of_other_platforms():
    a100 = context.plan(resolve("glm52-4-a100"))
    assert [i.name for i in a100.missing_inputs] == ["slimserve"]  # QuixiCore-rocm is MI300X only
    assert a100.files["inputs/quixicore-rocm/MISSING"] == ""
    mi300x = context.plan(resolve("glm52-2"))
    assert [i.name for i in mi300x.missing_inputs] == ["slimserve", "quixicore-rocm"]


PATCH = """Description: make the answer right
Origin: vendor, the port
Last-Update: 2026-12-01
---
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,2 +1,2 @@
 x = 1
-answer = 41
+answer = 42
"""


def patch_set(tmp_path: Path, text: str = PATCH, series: str = "answer.patch\n") -> tuple[Path, Path]:
    d = tmp_path / "patches"
    d.mkdir()
    (d / "answer.patch").write_text(text)
    (d / "series").write_text(series)
    target = tmp_path / "target"
    (target / "pkg").mkdir(parents=True)
    (target / "pkg" / "mod.py").write_text("x = 1\nanswer = 41\n")
    return d, target


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
def test_patches_apply_in_series_order(tmp_path):
    d, target = patch_set(tmp_path)
    assert port_patches.main([str(d), str(target)]) == 0
    assert (target / "pkg" / "mod.py").read_text() == "x = 1\nanswer = 42\n"


def test_patch_without_dep3_header_is_refused(tmp_path):
    d, target = patch_set(tmp_path, text=PATCH.replace("Origin: vendor, the port\n", ""))
    with pytest.raises(CookbookError) as exc:
        port_patches.check(d)
    assert "answer.patch: DEP-3 header lacks Origin" in exc.value.format_message()


def test_series_missing_a_patch_the_document_names_is_refused(tmp_path):
    d, _ = patch_set(tmp_path)
    with pytest.raises(CookbookError) as exc:
        port_patches.check(d, expect=ROOT / "ports" / "glm-5-mxfp4" / "patches" / "series")
    msg = exc.value.format_message()
    assert "fused-mxfp4-loading.patch: named by the document" in msg and msg.count("named by the document") == 10


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
def test_patch_that_does_not_apply_changes_nothing(tmp_path):
    d, target = patch_set(tmp_path)
    (target / "pkg" / "mod.py").write_text("x = 1\nanswer = 40\n")
    with pytest.raises(CookbookError) as exc:
        port_patches.apply(port_patches.check(d), target)
    assert exc.value.exit_code == 1 and "answer.patch does not apply" in exc.value.format_message()
    assert (target / "pkg" / "mod.py").read_text() == "x = 1\nanswer = 40\n"
