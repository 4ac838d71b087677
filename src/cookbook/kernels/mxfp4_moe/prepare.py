"""Expert-weight layouts the kernel reads, and the one-time step that makes the fast one.

- "converter": the tensors as the converter (and vLLM) write them; nothing to do.
- "frag": `prepare_experts` re-arranges packed bytes and scales once, at load time, into
  the tensor-core fragment order of `frag_layout.py`. Same size, dtype and shape: MXFP4
  stays MXFP4. It is the layout the shipped tables are tuned for.
"""

from __future__ import annotations

from . import frag_layout

LAYOUTS = ("converter", "frag")


def prepare_experts(w13_packed, w13_scales, w2_packed, w2_scales, interleave: int = 1):
    """(w13_packed, w13_scales, w2_packed, w2_scales) in the frag layout (new tensors).
    interleave > 1: row groups interleaved by that many (`frag_layout.interleave`, Gluon only);
    pass the same value to `fused_moe_mxfp4`."""
    out = []
    for packed, scales in ((w13_packed, w13_scales), (w2_packed, w2_scales)):
        p, s = frag_layout.prepare(packed, scales)
        r, k = p.shape[-2], 2 * p.shape[-1]
        out += [frag_layout.interleave(p, r, k, interleave, 1024), frag_layout.interleave(s, r, k, interleave, 64)]
    return tuple(out)
