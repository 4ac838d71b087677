"""The frag kernels' inner loop, compiled for Hopper (sm_90) on this machine: no GPU needed.

Guards what the H200 runs showed matters (kernels/mxfp4-moe/README.md): the weight tile must
reach the tensor cores without a shared-memory shuffle (ldmatrix rounds between barriers,
or PRMT re-pairing), and the decode must stay near 11 integer + 4 BF16x2 instructions per
8 weights. A layout regression keeps every result exact and only shows up here or as a
third of the bandwidth lost on the GPU.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="triton is not installed (pip install -e '.[dev]')")

SCRIPT = Path(__file__).resolve().parents[2] / "kernels" / "mxfp4-moe" / "sass_local.py"


@pytest.fixture(scope="module")
def reports():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, str(SCRIPT), "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_every_shape_uses_the_tensor_cores_without_shuffling_the_tile(reports):
    assert len(reports) >= 4
    for rep in reports:
        ops = rep["opcodes"]
        name = f"{rep['kernel']} {rep['block_n']}x{rep['block_k']}"
        assert ops.get("HGMMA", 0) > 0, f"{name}: no wgmma in the loop"
        assert ops.get("LDSM", 0) == 0, f"{name}: the weight tile goes through shared memory (ldmatrix)"
        assert ops.get("PRMT", 0) == 0, f"{name}: decoded values are re-paired (PRMT)"
        assert ops.get("BAR", 0) <= 2, f"{name}: {ops.get('BAR')} barriers per K step"


def test_decode_cost_per_weight(reports):
    for rep in reports:
        name = f"{rep['kernel']} {rep['block_n']}x{rep['block_k']}"
        assert rep["per_weight"] <= 3.2, f"{name}: {rep['per_weight']} instructions per weight"
        # 4 BF16x2 multiplies per 8 weights: exactly one per decoded pair
        w = rep["block_n"] * rep["block_k"] * (2 if rep["kernel"] == "w13" else 1) // (32 * rep["warps"])
        assert rep["opcodes"].get("HMUL2", 0) == w // 2, name
