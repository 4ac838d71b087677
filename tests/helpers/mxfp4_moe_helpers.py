"""Test matrices and comparisons shared by the CPU (interpreter) and GPU kernel tests."""

import numpy as np


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the same float32 bits, or both NaN."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def all_codes_all_scales(rng, scale_bytes):
    """Rows of 64 elements: every byte value appears in every row's packed data; row r uses scale byte r."""
    n = len(scale_bytes)
    packed = np.stack([rng.permutation(256)[:32] for _ in range(n)]).astype(np.uint8)
    packed[:, :16] = np.arange(16, dtype=np.uint8) * 17  # each code in both nibbles
    scales = np.repeat(np.asarray(scale_bytes, dtype=np.uint8)[:, None], 2, axis=1)
    return packed, scales


def frag_codes_all_scales(rng, scale_bytes):
    """Rows of 128 elements (one frag chunk): every code in both nibbles; row r uses scale byte r."""
    n = len(scale_bytes)
    packed = np.stack([rng.integers(0, 256, 64) for _ in range(n)]).astype(np.uint8)
    packed[:, :16] = np.arange(16, dtype=np.uint8) * 17
    packed[:, 32:48] = np.arange(16, dtype=np.uint8) * 17  # also in another scale block
    scales = np.repeat(np.asarray(scale_bytes, dtype=np.uint8)[:, None], 4, axis=1)
    return packed, scales
