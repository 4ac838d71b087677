"""cookbook lint's kernel and path checks (recipe/checks_paths.py: R016-R019) on the real recipes.

Each check's failing case is an invalid fixture with its lint snapshot (kernel-no-backend,
unknown-kernel, missing-paths); here: every real recipe passes, and the two Dockerfile lines the
recipes had before (a fork's Dockerfile and one not written yet, named as files of this
repository) are refused.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lint(*args, recipes=None):
    env = dict(os.environ, COLUMNS="80")
    if recipes:
        env["COOKBOOK_RECIPES"] = str(recipes)
    return subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "lint", *args], capture_output=True, text=True, env=env, cwd=ROOT
    )


def test_every_real_recipe_names_only_kernels_and_paths_that_exist_and_fit():
    p = lint()
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 error(s)" in p.stderr


def test_the_gaudi_kernel_entry_has_a_backend_that_is_not_here():
    from cookbook import kernel_catalogue as catalogue
    from cookbook.recipe.resolve import resolve

    r = resolve("glm52-mxfp4-8x-gaudi2").recipe
    [k] = r.image.kernels
    backend = catalogue.get(k.name).backend_for(r.hardware.platform)
    assert backend.id == "hpu" and backend.missing  # lint accepts it; show and build.sh say it is missing


def test_dockerfiles_named_as_files_of_this_repository_must_be_here(tmp_path):
    # both recipes name real Dockerfiles of this repository (ports/); point them at absent ones
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    rtx = recipes / "glm52-nvfp4-4x-rtxpro6000" / "recipe.yaml"
    gaudi = recipes / "glm52-mxfp4-8x-gaudi2" / "recipe.yaml"
    for path, old in (
        (rtx, "  dockerfile: ports/glm52-sm120/Dockerfile.glm52-sm120\n"),
        (gaudi, "  dockerfile: ports/glm-5-mxfp4/Dockerfile\n"),
    ):
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, old.replace("\n", ".absent\n"), 1))
    p = lint(str(rtx), str(gaudi), recipes=recipes)
    assert p.returncode == 1
    assert "R018 image.dockerfile: ports/glm52-sm120/Dockerfile.glm52-sm120.absent is not a file" in p.stdout
    assert "R018 image.dockerfile: ports/glm-5-mxfp4/Dockerfile.absent is not a file of this repository" in p.stdout
    assert p.stdout.count("R018") == 2, p.stdout
    assert (
        lint(
            str(ROOT / "recipes/glm52-nvfp4-4x-rtxpro6000/recipe.yaml"),
            str(ROOT / "recipes/glm52-mxfp4-8x-gaudi2/recipe.yaml"),
        ).returncode
        == 0
    )
