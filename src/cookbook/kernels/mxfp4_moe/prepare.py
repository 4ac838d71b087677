"""Expert-weight layouts the kernel reads, and the one-time step that makes the fast one.

- "converter": the tensors as the converter (and vLLM) write them; nothing to do.
- "frag": `prepare_experts` re-arranges packed bytes and scales once, at load time, into
  the tensor-core fragment order of `frag_layout.py`. Same size, dtype and shape: MXFP4
  stays MXFP4. It is the layout the shipped tables are tuned for.
"""

from __future__ import annotations

from . import frag_layout

LAYOUTS = ("converter", "frag")


def prepare_experts(w13_packed, w13_scales, w2_packed, w2_scales):
    """(w13_packed, w13_scales, w2_packed, w2_scales) in the frag layout (new tensors)."""
    p13, s13 = frag_layout.prepare(w13_packed, w13_scales)
    p2, s2 = frag_layout.prepare(w2_packed, w2_scales)
    return p13, s13, p2, s2
