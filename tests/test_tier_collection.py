"""A plain `pytest` over several folders keeps the same fast tier that `make test` runs folder by folder:
the kernels' conftest marks only its own parametrised cases as slow (it once marked every folder's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KERNELS = "tests/kernels"
# a file of parametrised cases outside the kernels, quick to collect
OTHER = "tests/test_host_cpu.py"


def _collected(*paths: str) -> set[str]:
    env = {**os.environ, "TRITON_INTERPRET": "1"}  # as `make test` sets it for the kernels
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return {line for line in out.stdout.splitlines() if "::" in line}


@pytest.mark.slow  # three collections, two of them importing torch: about 25 s on 2 cores
def test_one_run_over_folders_collects_what_the_separate_runs_do():
    together = _collected(OTHER, KERNELS)
    apart = _collected(OTHER) | _collected(KERNELS)
    assert together == apart
    # the other file's parametrised cases are all there, not filed as slow kernel tests
    assert sum(node.startswith(OTHER + "::test_the_recipe_for_a_cpuinfo[") for node in together) > 1
