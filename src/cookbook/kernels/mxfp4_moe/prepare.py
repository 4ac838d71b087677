"""One-time re-arrangement of MXFP4 expert weights for the kernel's "paired" layout.

The converter (and vLLM) store byte k of a row as elements 2k (low nibble) and 2k+1 (high
nibble). The kernel's PTX decoder turns 4 bytes into 4 BF16x2 registers, one from the low
nibbles of two bytes and so on; in that layout each register holds elements (k, k+2), and
the compiler re-pairs them (PRMT) into the (k, k+1) pairs of the tensor-core operand.
`pair_nibbles` moves the nibbles within each 4-byte group so that byte j holds elements j
(low) and 4 + j (high): then each decoder register already holds (k, k+1).

The result is MXFP4-sized (same shape and dtype, uint8); the scales are unchanged. It is a
permutation inside every 4 bytes, so any row split at 8-element boundaries stays valid.
"""

from __future__ import annotations

LAYOUTS = ("converter", "paired")


def pair_nibbles(packed):
    """uint8 [..., K/2] in the converter's layout -> the same tensor in the paired layout."""
    import torch

    if packed.dtype != torch.uint8 or packed.shape[-1] % 4:
        raise ValueError(f"pair_nibbles takes uint8 [..., K/2] with K/2 a multiple of 4, got "
                         f"{packed.dtype} {tuple(packed.shape)}")
    g = packed.reshape(*packed.shape[:-1], -1, 4)
    nib = torch.stack((g & 0xF, g >> 4), dim=-1).reshape(*g.shape[:-1], 8)   # elements 0..7
    return (nib[..., :4] | (nib[..., 4:] << 4)).reshape(packed.shape).contiguous()


def prepare_experts(w13_packed, w2_packed):
    """Both packed expert tensors in the paired layout (scales are used as they are)."""
    return pair_nibbles(w13_packed), pair_nibbles(w2_packed)
