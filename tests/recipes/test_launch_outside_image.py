"""A launch block that checks the fix pack (every recipe with a fix profile) fails as it promises when
pasted outside the image: from the cookbook checkout it finds the pack (COOKBOOK defaults to the
directory it is run from) and stops on "the image does not match"; anywhere else it says how to
point COOKBOOK at the checkout, instead of python's "can't open file '/fixes/apply_all.py'"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cookbook.plan.launch_block import launch_block
from cookbook.recipe.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]
SLUG = "glm52-mxfp4-8x-gaudi2"  # the recipe whose block runs the pack's check


def fix_lines() -> str:
    """The block's lines from the guard through the pack's check (the server is not started)."""
    lines = launch_block(resolve(SLUG)).splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("[ -f "))
    end = next(i for i, ln in enumerate(lines) if i > start and ln.endswith("exit 1; }"))
    return "\n".join(lines[start : end + 1]) + "\necho reached-the-server\n"


def run(cwd: Path, **env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "COOKBOOK"}
    base["PATH"] = f"{Path(sys.executable).parent}:{base.get('PATH', '/usr/bin:/bin')}"
    return subprocess.run(
        ["bash", "-c", fix_lines()], cwd=cwd, capture_output=True, text=True, env={**base, **env}, timeout=120
    )


def test_outside_the_checkout_it_says_how_to_point_at_the_cookbook(tmp_path):
    p = run(tmp_path)
    assert p.returncode == 1 and "reached-the-server" not in p.stdout
    assert f"no fixes/apply_all.py under COOKBOOK={tmp_path}" in p.stderr
    assert "export COOKBOOK=" in p.stderr and "can't open file" not in p.stderr


def test_from_the_checkout_it_runs_the_packs_check(tmp_path):
    """The pack is found and its check runs: this machine's engine is not the v0.30.0 image's."""
    p = run(ROOT)
    assert p.returncode == 1 and "reached-the-server" not in p.stdout
    assert "apply_all" in p.stderr and "no fixes/apply_all.py" not in p.stderr
    q = run(tmp_path, COOKBOOK=str(ROOT))  # pointed at it from elsewhere: the same check
    assert q.returncode == 1 and "apply_all" in q.stderr and "no fixes/apply_all.py" not in q.stderr
