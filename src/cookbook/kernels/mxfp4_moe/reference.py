"""Float32 reference of the routed-expert MoE, decoding weights with `cookbook.mxfp4`."""

from __future__ import annotations

import numpy as np

from cookbook import mxfp4


def moe_reference(x, w13_packed, w13_scales, w2_packed, w2_scales, topk_weights, topk_ids):
    """All inputs as numpy (x float32 [T, H]); returns float32 [T, H]. Decodes only the experts in use."""
    x = np.asarray(x, dtype=np.float32)
    t, h = x.shape
    i = w13_packed.shape[1] // 2
    out = np.zeros((t, h), dtype=np.float64)
    for e in np.unique(topk_ids):
        w13 = mxfp4.dequantize(w13_packed[e], w13_scales[e], np.float32).astype(np.float64)
        w2 = mxfp4.dequantize(w2_packed[e], w2_scales[e], np.float32).astype(np.float64)
        rows, slots = np.nonzero(topk_ids == e)
        xe = x[rows].astype(np.float64)
        g, u = xe @ w13[:i].T, xe @ w13[i:].T
        act = g / (1.0 + np.exp(-g)) * u
        out[rows] += topk_weights[rows, slots][:, None] * (act @ w2.T)
    return out.astype(np.float32)


def rel_error(out, ref) -> float:
    """||out - ref|| / ||ref|| (Frobenius); inf when out has NaN/Inf."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.isfinite(out).all():
        return float("inf")
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))
