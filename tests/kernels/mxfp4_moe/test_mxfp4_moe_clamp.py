"""The swiglu_limit clamp of the fused MXFP4 MoE kernel against vLLM 0.26.0's semantics.

vLLM (SiluAndMulWithClamp.forward_native, fused_moe.utils._swiglu_limit_torch and its Triton
twin): gate = min(gate, L), up = clamp(up, -L, L), act = silu(gate) * up, in float32. The
reference (`reference.swiglu_clamp`) is that, in float64. Runs in Triton's CPU interpreter
without a GPU (conftest), compiled on one.
"""

from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[dev]')")
pytest.importorskip("triton", reason="triton is not installed (pip install -e '.[dev]')")

from mxfp4_moe_helpers import same_bits  # noqa: E402

from cookbook import mxfp4  # noqa: E402
from cookbook.kernels.mxfp4_moe import LaunchConfig, fused_moe_mxfp4, prepare_experts  # noqa: E402
from cookbook.kernels.mxfp4_moe.moe import MoEInputError  # noqa: E402
from cookbook.kernels.mxfp4_moe.reference import moe_reference, rel_error  # noqa: E402

TOL = 1e-2  # the kernel's stated MoE tolerance (kernels/mxfp4-moe/README.md)
DEV = "cuda" if torch.cuda.is_available() else "cpu"
CONVERTER = LaunchConfig(block_t=16, block_n1=32, block_k1=64, block_n2=32, block_k2=64)
FRAG = LaunchConfig(block_t=16, block_n1=32, block_k1=128, block_n2=32, block_k2=128)
LIMIT = 0.3  # below the spread of gate and up here (std about 0.8): most values are clamped


def _experts(rng, e, h, i, scale=0.05):
    w13p, w13s = mxfp4.quantize(rng.standard_normal((e, 2 * i, h)).astype(np.float32) * scale)
    w2p, w2s = mxfp4.quantize(rng.standard_normal((e, h, i)).astype(np.float32) * scale)
    return w13p, w13s, w2p, w2s


def _call(x, experts, wts, ids, cfg, layout, limit):
    tens = [torch.from_numpy(np.ascontiguousarray(a)) for a in experts]
    if layout == "frag":
        tens = list(prepare_experts(*tens))
    out = fused_moe_mxfp4(
        x.to(DEV),
        *(a.to(DEV) for a in tens),
        torch.from_numpy(wts).to(DEV),
        torch.from_numpy(ids).to(DEV),
        config=cfg,
        layout=layout,
        swiglu_limit=limit,
    )
    return out.float().cpu().numpy()


def _case(seed, t, k, e=8, h=256, i=128):
    rng = np.random.default_rng(seed)
    experts = _experts(rng, e, h, i)
    ids = np.stack([rng.choice(e, k, replace=False) for _ in range(t)]).astype(np.int32)
    wts = rng.random((t, k)).astype(np.float32)
    x = torch.randn(t, h, generator=torch.Generator().manual_seed(seed)).bfloat16()
    return x, experts, wts / wts.sum(1, keepdims=True), ids


@pytest.mark.parametrize(
    "layout,cfg",
    [
        ("converter", CONVERTER),
        ("converter", replace(CONVERTER, split1=2)),  # clamp in the split-K reduce launch
        ("frag", FRAG),
        ("frag", replace(FRAG, split1=2)),
        ("frag", replace(FRAG, split1=2, fuse=True)),  # clamp in the fused split-K epilogue
    ],
    ids=["converter", "converter-split", "frag", "frag-split", "frag-split-fused"],
)
def test_clamped_moe_matches_vllm_semantics_and_the_clamp_bites(layout, cfg):
    x, experts, wts, ids = _case(40, 5, 3)
    out = _call(x, experts, wts, ids, cfg, layout, LIMIT)
    ref = moe_reference(x.float().numpy(), *experts, wts, ids, swiglu_limit=LIMIT)
    plain = moe_reference(x.float().numpy(), *experts, wts, ids)
    err = rel_error(out, ref)
    assert 0 < err <= TOL, f"relative error {err:.2e} against the clamped reference"
    assert rel_error(plain, ref) > 20 * TOL  # the clamp changes the answer far beyond the tolerance
    assert rel_error(out, plain) > 10 * TOL


def test_clamp_is_one_sided_on_gate_and_two_sided_on_up_element_by_element():
    """One token, one expert of weight 1, W2 = identity: out is the act row itself, so each of
    the I values is checked against vLLM's formula (a symmetric gate clamp would fail here:
    silu(-L) is far from silu(g) for the gate values well below -L)."""
    h = i = 128
    rng = np.random.default_rng(7)
    w13 = rng.standard_normal((1, 2 * i, h)).astype(np.float32) * 0.1
    w13p, w13s = mxfp4.quantize(w13)
    w2p, w2s = mxfp4.quantize(np.eye(h, i, dtype=np.float32)[None])
    experts = (w13p, w13s, w2p, w2s)
    x = torch.randn(1, h, generator=torch.Generator().manual_seed(3)).bfloat16()
    ids, wts = np.zeros((1, 1), np.int32), np.ones((1, 1), np.float32)
    w = mxfp4.dequantize(w13p[0], w13s[0], np.float32).astype(np.float64)
    gu = x.float().numpy().astype(np.float64) @ w.T
    g, u = gu[0, :i], gu[0, i:]
    assert (g < -2 * LIMIT).sum() >= 10 and (g > LIMIT).sum() >= 10 and (np.abs(u) > LIMIT).sum() >= 10
    gc, uc = np.minimum(g, LIMIT), np.clip(u, -LIMIT, LIMIT)
    want = gc / (1 + np.exp(-gc)) * uc
    for layout, cfg in (("converter", CONVERTER), ("frag", FRAG)):
        got = _call(x, experts, wts, ids, cfg, layout, LIMIT)[0]
        # act and out are each rounded to BF16 (2**-9 relative); g and u differ from the float64 sums
        # by the float32 products' rounding
        assert np.allclose(got, want, rtol=2**-7, atol=1e-4), (layout, np.abs(got - want).max())
        sym = np.clip(g, -LIMIT, LIMIT)
        assert not np.allclose(got, sym / (1 + np.exp(-sym)) * uc, rtol=2**-7, atol=1e-4)


def test_a_limit_that_never_binds_gives_the_unclamped_bits():
    x, experts, wts, ids = _case(41, 3, 2)
    plain = _call(x, experts, wts, ids, FRAG, "frag", None)
    loose = _call(x, experts, wts, ids, FRAG, "frag", 1e30)
    assert same_bits(plain, loose).all()


@pytest.mark.parametrize("bad", [0, -7.0, float("nan"), float("inf"), "7", True])
def test_a_bad_limit_is_refused_with_one_message(bad):
    x, experts, wts, ids = _case(42, 1, 2)
    with pytest.raises(MoEInputError, match="swiglu_limit must be None or a positive finite number"):
        _call(x, experts, wts, ids, CONVERTER, "converter", bad)
