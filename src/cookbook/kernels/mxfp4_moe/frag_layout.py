"""The "frag" layout: MXFP4 experts re-arranged once so each thread loads its tensor-core operand.

Why: in the converter's layout a thread decodes nibbles that belong to other threads'
tensor-core fragments, and the compiler re-pairs them (PRMT, shared memory) on every tile:
about 7 instructions per weight. Here the bytes are ordered so that a plain 16-byte load
gives each thread exactly the values of its wgmma/mma A-operand fragment, and the bits inside
each 32-bit word are placed so that the decoder needs 9 integer instructions per 8 values
(and 4 BF16x2 multiplies for the scale).

Same size and dtype as the converter's tensors (a permutation of bits and bytes): packed
uint8 [..., R, K/2] and scales uint8 [..., R, K/32], R a multiple of 16, K of 128.

Geometry, for a matrix A[R, K] (rows = output features, K = the reduction):
- chunk (rg, kch): 16 rows x 128 K, 1024 packed bytes, stored contiguously, kch fastest;
- lane l = 4g + c (g = 0..7, c = 0..3) owns 32 bytes of the chunk: 8 words, j = 0..7;
- word j of lane (g, c) holds four BF16 pairs p = 0..3, p = m3 + 2*k3, each of two
  values k0 = 0, 1: A[16 rg + g + 8 m3, 128 kch + 32 c + 4 j + 2 k3 + k0];
  the kernel feeds the pair to the tensor core at logical k = 16 j + 8 k3 + 2 c + k0 of the
  chunk (the activation tile is permuted to match), so lane c only ever needs scale block
  4 kch + c: one scale per row per chunk instead of eight;
- scales: chunk (rg, kch) holds 64 bytes, ordered (g, c, m3): s[16 rg + g + 8 m3, 4 kch + c].

Bits: the decoder makes pair p's BF16x2 register (value * 2**-126, the same trick as the
converter-layout decoder: E2M1 mantissa to bit 6, exponent to bits 7-8, sign to bit 15; +16
for the second value) by rotating the word left and masking with PAIR_MASK:
    pair 0 = q & PAIR_MASK                pair 1 = rotl(q, 3) & PAIR_MASK
    u = rotl(q, 5) where U_SELECT has a 1, else rotl(q, 11)      (two rotations and one lop3)
    pair 2 = u & PAIR_MASK                pair 3 = rotl(u, 3) & PAIR_MASK
9 integer instructions per word. No placement lets one rotation of the word serve each pair
(an exhaustive search over words of 32-128 bits finds no tiling of the 8 bits a pair takes),
so two pairs must merge two rotations; here they share one merge, u, which holds both of
their 16 bits (u's other bits are never read). The placement before (pairs 2 and 3 each
merging a magnitude and a sign rotation) took 11.
"""

from __future__ import annotations

CHUNK_ROWS = 16
CHUNK_K = 128
PAIR_MASK = 0x81C081C0  # the bits of two E2M1 codes in a BF16x2 register (value * 2**-126)
PAIR_ROT = 3  # pair 1 from the word, pair 3 from u: rotated left by 3
U_ROT = (5, 11)  # u: the word rotated by 5 where U_SELECT is 1, by 11 elsewhere
U_SELECT = 0x80A880A8
_OUT_BIT = (6, 7, 8, 15)  # E2M1 code bit 0 (mantissa), 1, 2 (exponent), 3 (sign) -> BF16 bit


def _u_rot(u_bit: int) -> int:
    return U_ROT[0] if (U_SELECT >> (u_bit % 32)) & 1 else U_ROT[1]


def rotation(pair: int, out_bit: int) -> int:
    """How far left the decoder rotates the word to bring storage bit (out_bit - rotation) to out_bit."""
    if pair < 2:
        return PAIR_ROT * pair
    shift = PAIR_ROT if pair == 3 else 0  # pair 3 = rotl(u, 3): u's bit out_bit - 3
    return shift + _u_rot(out_bit - shift)


def storage_bit(pair: int, k0: int, code_bit: int) -> int:
    """Bit of the 32-bit word that holds `code_bit` of value k0 of `pair`."""
    out = _OUT_BIT[code_bit] + 16 * k0
    return (out - rotation(pair, out)) % 32


def check_shape(packed, scales=None) -> tuple[int, int]:
    """(R, K) of a [..., R, K/2] packed tensor, or ValueError naming what does not fit."""
    import torch

    if packed.dtype != torch.uint8 or packed.dim() < 2:
        raise ValueError(f"frag layout: packed must be uint8 [..., R, K/2], got {packed.dtype} {tuple(packed.shape)}")
    r, k = packed.shape[-2], 2 * packed.shape[-1]
    if r % CHUNK_ROWS or k % CHUNK_K:
        raise ValueError(f"frag layout: R={r} must be a multiple of {CHUNK_ROWS} and K={k} of {CHUNK_K}")
    if scales is not None and (scales.dtype != torch.uint8 or tuple(scales.shape) != (*packed.shape[:-1], k // 32)):
        raise ValueError(
            f"frag layout: scales must be uint8 {(*packed.shape[:-1], k // 32)}, "
            f"got {scales.dtype} {tuple(scales.shape)}"
        )
    return r, k


def _matrix_to_frag(m, r: int, k: int):
    """One [R, K/2] matrix (converter layout) -> frag bytes [R, K/2]."""
    import torch

    codes = torch.stack((m & 0xF, m >> 4), dim=-1).reshape(r, k).to(torch.int32)
    v = codes.reshape(r // 16, 2, 8, k // 128, 4, 8, 2, 2)  # rows (rg, m3, g); K (kch, c, j, k3, k0)
    word = torch.zeros(r // 16, k // 128, 8, 4, 8, dtype=torch.int32, device=m.device)
    for m3 in range(2):
        for k3 in range(2):
            for k0 in range(2):
                c = v[:, m3, :, :, :, :, k3, k0].permute(0, 2, 1, 3, 4)  # [RG, KCH, g, c, j]
                for b in range(4):
                    word |= ((c >> b) & 1) << storage_bit(m3 + 2 * k3, k0, b)
    return word.reshape(-1).view(torch.uint8).reshape(r, k // 2)


def _matrix_from_frag(f, r: int, k: int):
    import torch

    word = f.contiguous().reshape(-1).view(torch.int32).reshape(r // 16, k // 128, 8, 4, 8)
    codes = torch.zeros(r // 16, 2, 8, k // 128, 4, 8, 2, 2, dtype=torch.int32, device=f.device)
    for m3 in range(2):
        for k3 in range(2):
            for k0 in range(2):
                val = sum(((word >> storage_bit(m3 + 2 * k3, k0, b)) & 1) << b for b in range(4))
                codes[:, m3, :, :, :, :, k3, k0] = val.permute(0, 2, 1, 3, 4)  # [RG, g, KCH, c, j]
    codes = codes.reshape(r, k // 2, 2).to(torch.uint8)
    return codes[..., 0] | (codes[..., 1] << 4)


def _per_matrix(fn, t, r: int, k: int):
    """Apply fn to each [R, K/2] matrix of t (one at a time: bounded memory for 256 experts)."""
    import torch

    flat = t.contiguous().reshape(-1, r, k // 2)
    out = torch.empty_like(flat)
    for i in range(flat.shape[0]):
        out[i] = fn(flat[i], r, k)
    return out.reshape(t.shape)


def to_frag(packed):
    """Converter-layout packed uint8 [..., R, K/2] -> the frag layout (same shape, dtype)."""
    r, k = check_shape(packed)
    return _per_matrix(_matrix_to_frag, packed, r, k)


def from_frag(frag):
    """Inverse of `to_frag` (tests, and reading a prepared tensor back)."""
    r, k = check_shape(frag)
    return _per_matrix(_matrix_from_frag, frag, r, k)


def scales_to_frag(scales, r: int, k: int):
    """uint8 [..., R, K/32] -> chunk order (rg, kch, g, c, m3), same shape."""
    lead = scales.shape[:-2]
    n = len(lead)
    v = scales.reshape(*lead, r // 16, 2, 8, k // 128, 4)  # [.., RG, m3, g, KCH, c]
    return v.permute(*range(n), n, n + 3, n + 2, n + 4, n + 1).reshape(scales.shape).contiguous()


def scales_from_frag(scales, r: int, k: int):
    lead = scales.shape[:-2]
    n = len(lead)
    v = scales.reshape(*lead, r // 16, k // 128, 8, 4, 2)  # [.., RG, KCH, g, c, m3]
    return v.permute(*range(n), n, n + 4, n + 2, n + 1, n + 3).reshape(scales.shape).contiguous()


def prepare(packed, scales):
    """(packed, scales) of one expert tensor in the frag layout; run once at load time."""
    r, k = check_shape(packed, scales)
    return _per_matrix(_matrix_to_frag, packed, r, k), scales_to_frag(scales, r, k)
