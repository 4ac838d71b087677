"""Golden launch blocks: the rendered launch block of every seed recipe (default quant) is
snapshotted in tests/recipes/golden/<slug>.sh. Refresh with UPDATE_GOLDEN=1 after a deliberate
change, and review the diff."""

import os
import re

import pytest
from seed_common import ROOT, SEED_RECIPES

from cookbook.plan.launch_block import launch_block
from cookbook.recipe.resolve import resolve

GOLDEN = ROOT / "tests" / "recipes" / "golden"
HASH = re.compile(r"recipe sha256:[0-9a-f]+")


def rendered(slug: str) -> str:
    # the content hash changes with every edit of a reason; the commands are what is pinned
    return HASH.sub("recipe sha256:…", launch_block(resolve(slug)))


@pytest.mark.parametrize("slug", SEED_RECIPES)
def test_launch_block_matches_golden(slug):
    path = GOLDEN / f"{slug}.sh"
    text = rendered(slug)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden for {slug}: run UPDATE_GOLDEN=1 pytest {__file__}"
    assert text == path.read_text(), f"{slug}'s launch block changed; if deliberate, UPDATE_GOLDEN=1 and review"


def test_every_golden_belongs_to_a_recipe():
    stale = sorted(p.stem for p in GOLDEN.glob("*.sh") if p.stem not in SEED_RECIPES)
    assert stale == []


@pytest.mark.parametrize("slug", SEED_RECIPES)
def test_launch_block_is_valid_bash(slug):
    import shutil
    import subprocess

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not installed")
    res = subprocess.run([bash, "-n"], input=launch_block(resolve(slug)), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
