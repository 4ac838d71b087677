"""OCP MX v1.0 MXFP4 encode/decode in numpy.

Format (OCP Microscaling Formats v1.0, §5.3 and §6.3):
- An element is FP4 E2M1: code = sign<<3 | exp<<1 | mant; codes 0..7 are the magnitudes
  0, 0.5, 1, 1.5, 2, 3, 4, 6 (code 1 is the subnormal 0.5). There is no Inf or NaN.
- Every BLOCK = 32 consecutive elements along the last axis share one E8M0 scale byte:
  value 2**(byte - 127); byte 0xFF is NaN (the whole block decodes to NaN).
- Packing (the safetensors layout of AMD Quark `Pack_fp4`, vLLM, gpt-oss, ModelOpt):
  ``packed[..., k] = code[..., 2k] | code[..., 2k+1] << 4``: the EVEN element goes in the
  LOW nibble. GGUF's MXFP4 block uses a different (split-half) order; see
  `to_gguf_nibbles`.

Encoding rules (`quantize`):
- Scale (``scale_rule="floor"``, the OCP default, as microxcaling and ggml):
  shared_exp = floor(log2(amax)) - 2 (2 = emax of E2M1), clamped to [-127, 127], so the
  byte is 0..254. An all-zero block gets byte 0 (ggml does the same).
  ``scale_rule="even"`` is AMD Quark's variant: amax is first rounded at one mantissa bit
  (amax >= 1.75 * 2**n counts as 2**(n+1)), which avoids saturating large elements.
- Elements: x / 2**shared_exp rounded to the nearest E2M1 value, ties to the even code
  (round-half-to-even, microxcaling "even"), saturating at +-6. The sign is kept, so a
  negative value that rounds to zero encodes as code 8 (-0.0).
- Non-finite input (NaN, +-Inf), or a float64 block whose shared exponent exceeds 127:
  by default `quantize` raises ValueError naming the first
  bad index, since a weight tensor with NaN/Inf is a bug upstream. With
  ``nonfinite="nan"`` the block gets scale byte 0xFF (NaN, as OCP specifies for a block
  whose shared exponent overflows) and codes 0, so it decodes to NaN.
"""

from __future__ import annotations

import numpy as np

from cookbook.errors import CookbookError

BLOCK = 32
SCALE_BIAS = 127
SCALE_NAN = 0xFF
E2M1_EMAX = 2  # exponent of the largest E2M1 magnitude, 6 = 1.5 * 2**2
E2M1_MAX = 6.0

# float32 value of each 4-bit code; codes 8..15 are the negatives (8 is -0.0).
_POS = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)
E2M1_VALUES: np.ndarray = np.concatenate([_POS, -_POS]).astype(np.float32)
E2M1_VALUES.setflags(write=False)

# Elements processed per chunk, to bound temporaries on large tensors (~40 MB).
_CHUNK_ELEMS = 1 << 20


class MXFP4Error(CookbookError, ValueError):
    """Input that cannot be encoded or decoded (shape, dtype, non-finite values)."""


def _check_last_axis(x: np.ndarray, what: str) -> None:
    if x.ndim == 0 or x.shape[-1] % BLOCK != 0:
        raise MXFP4Error(
            f"{what}: last axis has {x.shape[-1] if x.ndim else 0} elements; MXFP4 needs a "
            f"multiple of {BLOCK} (shape {tuple(x.shape)})"
        )


def _shared_exponent(amax: np.ndarray, scale_rule: str) -> np.ndarray:
    """int32 shared exponent per block from the block amax (all finite, >= 0)."""
    a = np.ascontiguousarray(amax, dtype=np.float64)
    if scale_rule == "even":
        # Quark even_round: round amax at 1 mantissa bit (float64: add 1<<50, drop the
        # mantissa). A carry into the exponent is exactly "round up to 2**(n+1)".
        bits = (a.view(np.uint64) + np.uint64(1 << 50)) & np.uint64(0xFFF0000000000000)
        a = bits.view(np.float64)
    elif scale_rule != "floor":
        raise MXFP4Error(f"scale_rule must be 'floor' or 'even', got {scale_rule!r}")
    # frexp is exact (no log2 rounding): a = m * 2**e with m in [0.5, 1) -> floor(log2 a) = e-1.
    _, e = np.frexp(a)
    exp = e.astype(np.int32) - 1 - E2M1_EMAX
    exp = np.where(a == 0, -SCALE_BIAS, exp)
    return np.maximum(exp, -SCALE_BIAS)  # above 127 the caller treats the block as NaN


def _round_magnitudes(mag: np.ndarray) -> np.ndarray:
    """Non-negative magnitudes (already divided by the scale) -> codes 0..7, ties to even, saturating.

    The E2M1 grid has step 0.5 below 2, 1 in [2, 4) and 2 in [4, 6]; on each piece the code
    is an offset plus rint() of an exact affine map, and rint's ties-to-even on that map are
    exactly ties to the even code (0.25 -> 0, 0.75 -> 1.0, 2.5 -> 2, 3.5 -> 4, 5 -> 4).
    """
    two = mag.dtype.type(2)
    c = np.where(mag < 2, np.rint(mag * two), np.where(mag < 4, 4 + np.rint(mag - two), 6 + np.rint((mag - 4) / two)))
    return np.minimum(c, 7).astype(np.uint8)  # 7 (= 6.0) is the largest code: saturation


def quantize(x: np.ndarray, *, scale_rule: str = "floor", nonfinite: str = "raise") -> tuple[np.ndarray, np.ndarray]:
    """Encode [..., K] floats (K % 32 == 0) -> (packed uint8 [..., K//2], scales uint8 [..., K//32])."""
    x = np.asarray(x)
    if x.dtype not in (np.float16, np.float32, np.float64):
        raise MXFP4Error(f"quantize: dtype {x.dtype} is not a float type (convert BF16 to float32 first)")
    _check_last_axis(x, "quantize")
    if nonfinite not in ("raise", "nan"):
        raise MXFP4Error(f"nonfinite must be 'raise' or 'nan', got {nonfinite!r}")
    lead, k = x.shape[:-1], x.shape[-1]
    blocks = x.reshape(-1, BLOCK)
    n_blocks = blocks.shape[0]
    packed = np.empty((n_blocks, BLOCK // 2), dtype=np.uint8)
    scales = np.empty(n_blocks, dtype=np.uint8)
    step = max(1, _CHUNK_ELEMS // BLOCK)
    # float32 is exact for float16/32 input (scaling by a power of two, grid steps of 0.5..2)
    work = np.float64 if x.dtype == np.float64 else np.float32
    for start in range(0, n_blocks, step):
        b = blocks[start : start + step].astype(work)
        finite = np.isfinite(b)
        bad_block = ~finite.all(axis=1)
        if bad_block.any():
            if nonfinite == "raise":
                flat = start * BLOCK + int(np.argmin(finite.reshape(-1)))
                idx = np.unravel_index(flat, x.shape)
                raise MXFP4Error(f"quantize: non-finite value {x[idx]} at index {tuple(int(i) for i in idx)}")
            b = np.where(finite, b, 0.0)
        amax = np.abs(b).max(axis=1)
        exp = _shared_exponent(amax, scale_rule)
        too_big = exp > SCALE_BIAS  # only float64 input beyond ~2**130: E8M0 cannot scale it
        if too_big.any():
            if nonfinite == "raise":
                i = start + int(np.argmax(too_big))
                raise MXFP4Error(f"quantize: block {i} has amax {amax[i - start]:g}, beyond E8M0 range (2**127 * 6)")
            bad_block |= too_big
            exp = np.minimum(exp, SCALE_BIAS)
        mag = np.abs(b) * np.ldexp(work(1.0), -exp)[:, None]  # exact: power-of-two scaling
        codes = _round_magnitudes(mag) | (np.signbit(b).astype(np.uint8) << 3)
        codes[bad_block] = 0
        packed[start : start + step] = pack_e2m1(codes)
        s = (exp + SCALE_BIAS).astype(np.uint8)
        s[bad_block] = SCALE_NAN
        scales[start : start + step] = s
    return packed.reshape(*lead, k // 2), scales.reshape(*lead, k // BLOCK)


def pack_e2m1(codes: np.ndarray) -> np.ndarray:
    """uint8 codes [..., K] (values 0..15, K even) -> packed [..., K//2], even element in the low nibble."""
    codes = np.asarray(codes, dtype=np.uint8)
    if codes.ndim == 0 or codes.shape[-1] % 2:
        raise MXFP4Error(f"pack_e2m1: last axis must be even, shape {tuple(codes.shape)}")
    return (codes[..., 0::2] & 0x0F) | ((codes[..., 1::2] & 0x0F) << 4)


def unpack_e2m1(packed: np.ndarray) -> np.ndarray:
    """packed uint8 [..., K//2] -> uint8 codes [..., K] (low nibble first)."""
    packed = np.asarray(packed)
    if packed.dtype != np.uint8:
        raise MXFP4Error(f"unpack_e2m1: packed must be uint8, got {packed.dtype}")
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = packed & 0x0F
    out[..., 1::2] = packed >> 4
    return out


def e8m0_to_float(scales: np.ndarray) -> np.ndarray:
    """E8M0 bytes -> float32 2**(byte-127); 0xFF -> NaN. Byte 0 is 2**-127 (a float32 subnormal)."""
    s = np.asarray(scales)
    if s.dtype != np.uint8:
        raise MXFP4Error(f"e8m0_to_float: scales must be uint8, got {s.dtype}")
    with np.errstate(over="ignore"):  # byte 255 would be 2**128; it is NaN below
        out = np.ldexp(np.float32(1.0), s.astype(np.int32) - SCALE_BIAS).astype(np.float32)
    out[s == SCALE_NAN] = np.nan
    return out


def dequantize(packed: np.ndarray, scales: np.ndarray, dtype=np.float32) -> np.ndarray:
    """(packed uint8 [..., K//2], scales uint8 [..., K//32]) -> values [..., K] in `dtype`.

    Values beyond the range of `dtype` become +-inf (e.g. 6 * 2**127 in float32).
    """
    packed = np.asarray(packed)
    scales = np.asarray(scales)
    if scales.dtype != np.uint8:
        raise MXFP4Error(f"dequantize: scales must be uint8, got {scales.dtype}")
    k = packed.shape[-1] * 2 if packed.ndim else 0
    if k % BLOCK or packed.shape[:-1] != scales.shape[:-1] or scales.shape[-1] != k // BLOCK:
        raise MXFP4Error(
            f"dequantize: packed shape {tuple(packed.shape)} and scales shape "
            f"{tuple(scales.shape)} do not match (need scales [..., K//32] for K = 2 * packed[-1])"
        )
    codes = unpack_e2m1(packed)
    vals = E2M1_VALUES.astype(np.float64)[codes].reshape(*scales.shape, BLOCK)
    mult = np.ldexp(1.0, scales.astype(np.int32) - SCALE_BIAS)
    mult = np.where(scales == SCALE_NAN, np.nan, mult)
    with np.errstate(over="ignore", invalid="ignore"):
        out = (vals * mult[..., None]).astype(dtype)
    return out.reshape(codes.shape)


def to_gguf_nibbles(packed: np.ndarray) -> np.ndarray:
    """Safetensors nibble order -> GGUF MXFP4 order (per 32: element j low nibble of byte j, j+16 high)."""
    codes = unpack_e2m1(packed).reshape(-1, BLOCK)
    out = (codes[:, :16] & 0x0F) | (codes[:, 16:] << 4)
    return out.reshape(packed.shape)


def float32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round-to-nearest-even; NaN stays NaN."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(x)
    out[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)  # keep sign, force quiet NaN
    return out


def bf16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32 (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
