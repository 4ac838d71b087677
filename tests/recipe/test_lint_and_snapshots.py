"""Golden snapshots of rendered lint errors for every invalid fixture."""

import subprocess
import sys

import pytest
from recipe_helpers import FIXTURES, check_golden

INVALID = sorted(p.name for p in (FIXTURES / "invalid").iterdir() if p.is_dir())


def run(*args, env_recipes=None):
    import os

    env = dict(os.environ, COLUMNS="80")
    if env_recipes:
        env["COOKBOOK_RECIPES"] = str(env_recipes)
    return subprocess.run(
        [sys.executable, "-m", "cookbook.cli", *args], capture_output=True, text=True, env=env, cwd=FIXTURES.parents[2]
    )


@pytest.mark.parametrize("case", INVALID)
def test_invalid_fixture_errors_match_snapshot(case):
    p = run("lint", f"tests/fixtures/recipes/invalid/{case}/recipe.yaml", env_recipes=FIXTURES / "invalid")
    assert p.returncode == 1, p.stderr
    assert p.stdout.strip(), "lint found nothing in an invalid fixture"
    check_golden(f"lint/{case}.txt", p.stdout)


def test_every_lint_line_has_position_id_and_key():
    import re

    for case in INVALID:
        p = run("lint", f"tests/fixtures/recipes/invalid/{case}/recipe.yaml", env_recipes=FIXTURES / "invalid")
        for line in p.stdout.splitlines():
            if line.startswith("  help: "):
                continue
            assert re.match(
                r"^tests/fixtures/recipes/invalid/[\w-]+/recipe\.yaml:\d+:\d+: R\d{3}( [\w.-]+)?: ", line
            ), line


def test_valid_fixtures_lint_clean():
    p = run("lint", "tests/fixtures/recipes/valid", env_recipes=FIXTURES / "valid")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 recipe(s) checked: 0 error(s)" in p.stderr


def test_lint_missing_path_is_one_clear_error():
    p = run("lint", "no/such/dir")
    assert p.returncode == 2
    assert "no/such/dir: no such file or directory" in p.stderr
    assert "Traceback" not in p.stderr


def test_stale_verified_is_reported(tmp_path):
    import shutil

    shutil.copytree(FIXTURES / "valid", tmp_path / "r")
    env = tmp_path / "r"
    import os

    from cookbook.recipe.resolve import resolve

    os.environ["COOKBOOK_RECIPES"] = str(env)
    try:
        good = resolve("demo-2").content_hash
    finally:
        del os.environ["COOKBOOK_RECIPES"]
    f = env / "demo-2" / "recipe.yaml"
    f.write_text(f.read_text() + f"verified:\n  date: '2026-11-29'\n  recipe_hash: '{good}'\n")
    p = run("lint", str(f), env_recipes=env)
    assert "R015" not in p.stdout, p.stdout
    f.write_text(f.read_text().replace("gpu_memory_utilization: 0.86", "gpu_memory_utilization: 0.85"))
    p = run("lint", str(f), env_recipes=env)
    assert "R015 verified: the recipe changed after it was verified" in p.stdout
    p = run("list", env_recipes=env)
    assert "stale" in p.stdout
