"""Float32 reference of the routed-expert MoE, decoding weights with `cookbook.mxfp4`."""

from __future__ import annotations

import numpy as np

from cookbook import mxfp4


def swiglu_clamp(g, u, swiglu_limit):
    """vLLM 0.26.0's clamp before SiLU-and-multiply (SiluAndMulWithClamp.forward_native and
    fused_moe.utils._swiglu_limit_torch): gate clamped to at most L, up to [-L, L]; None: unchanged."""
    if swiglu_limit is None:
        return g, u
    return np.minimum(g, swiglu_limit), np.clip(u, -swiglu_limit, swiglu_limit)


def moe_reference(x, w13_packed, w13_scales, w2_packed, w2_scales, topk_weights, topk_ids, swiglu_limit=None):
    """All inputs as numpy (x float32 [T, H]); returns float32 [T, H]. Decodes only the experts in use.
    swiglu_limit: vLLM's clamp (`swiglu_clamp`), or None."""
    x = np.asarray(x, dtype=np.float32)
    t, h = x.shape
    i = w13_packed.shape[1] // 2
    out = np.zeros((t, h), dtype=np.float64)
    for e in np.unique(topk_ids):
        w13 = mxfp4.dequantize(w13_packed[e], w13_scales[e], np.float32).astype(np.float64)
        w2 = mxfp4.dequantize(w2_packed[e], w2_scales[e], np.float32).astype(np.float64)
        rows, slots = np.nonzero(topk_ids == e)
        xe = x[rows].astype(np.float64)
        g, u = swiglu_clamp(xe @ w13[:i].T, xe @ w13[i:].T, swiglu_limit)
        act = g / (1.0 + np.exp(-g)) * u
        # add.at: a token may list an expert twice (both slots count); out[rows] += would drop one
        np.add.at(out, rows, topk_weights[rows, slots][:, None] * (act @ w2.T))
    return out.astype(np.float32)


def rel_error(out, ref) -> float:
    """||out - ref|| / ||ref|| (Frobenius); inf when out has NaN/Inf."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.isfinite(out).all():
        return float("inf")
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def dequant_torch(packed, scales, dtype=None):
    """Torch twin of `cookbook.mxfp4.dequantize` (any device): uint8 [..., K/2], [..., K/32] -> [..., K]."""
    import torch

    dtype = dtype or torch.float32
    lut = torch.tensor(mxfp4.E2M1_VALUES, dtype=torch.float32, device=packed.device)
    codes = torch.stack((packed & 0x0F, packed >> 4), dim=-1).reshape(*packed.shape[:-1], -1)
    vals = lut[codes.long()].reshape(*scales.shape, mxfp4.BLOCK)
    mult = torch.ldexp(torch.ones(scales.shape, device=packed.device), scales.to(torch.int32) - mxfp4.SCALE_BIAS)
    mult = torch.where(scales == mxfp4.SCALE_NAN, torch.nan, mult)
    return (vals * mult[..., None]).reshape(codes.shape).to(dtype)


def moe_torch(x, w13_packed, w13_scales, w2_packed, w2_scales, topk_weights, topk_ids, dtype=None, swiglu_limit=None):
    """Per-expert dequantize-then-matmul MoE in PyTorch (the benchmark's baseline; float32 = reference).

    dtype bfloat16 mirrors a plain serving path: BF16 weights and activations, FP32 top-k sum.
    swiglu_limit: vLLM's clamp (`swiglu_clamp`), or None.
    """
    import torch

    dtype = dtype or torch.float32
    t, h = x.shape
    i = w13_packed.shape[1] // 2
    out = torch.zeros(t, h, dtype=torch.float32, device=x.device)
    xd = x.to(dtype)
    for e in torch.unique(topk_ids).tolist():
        rows, slots = torch.nonzero(topk_ids == e, as_tuple=True)
        w13 = dequant_torch(w13_packed[e], w13_scales[e], dtype)
        w2 = dequant_torch(w2_packed[e], w2_scales[e], dtype)
        gu = xd[rows] @ w13.T
        g, u = gu[:, :i], gu[:, i:]
        if swiglu_limit is not None:
            g, u = g.clamp(max=swiglu_limit), u.clamp(-swiglu_limit, swiglu_limit)
        act = torch.nn.functional.silu(g) * u
        y = (act @ w2.T).float()
        out.index_add_(0, rows, topk_weights[rows, slots].float()[:, None] * y)
    return out
