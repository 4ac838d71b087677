"""Triton kernels of the fused MXFP4 MoE (decode sizes).

Weights stay MXFP4 in memory (packed E2M1 nibbles, even element in the low nibble, one
E8M0 scale byte per 32 elements along K) and are decoded in registers, tile by tile.

Four launches per MoE call (five when the w13 product is split along K):
1. `_align_kernel` (one program): groups the T*k (token, expert) pairs by expert into
   blocks of BLOCK_T pairs (one expert per block), so each expert's weights are read once.
2. `_w13_silu_kernel`: act[pair] = silu(x W_gate^T) * (x W_up^T), stored BF16.
3. `_w2_kernel`: y[pair] = act[pair] W2^T, stored FP32, one row per pair.
4. `_topk_sum_kernel`: out[t] = sum_j topk_weight[t, j] * y[t*k + j], in a fixed order
   (deterministic, no atomics), stored BF16.

Split-K (SPLIT > 1, for small batches, where one expert's rows give too few programs to keep
the memory system busy): each of SPLIT programs reads 1/SPLIT of a row's K steps and writes
float32 partial sums; `_silu_reduce_kernel` (w13) and `_topk_sum_kernel` (w2) add them in a
fixed order, so results stay deterministic. The weights are read once either way.

Decoding is exact: `_dequant_tile` (float32 arithmetic; the CPU interpreter's path) and
`_dequant_halves_asm` (inline PTX, BF16x2 arithmetic; GPU only) reproduce
`cookbook.mxfp4.dequantize` bit for bit for every code and every scale byte. Both move the
E2M1 bits into BF16 bit positions with integer ops (two values per 32-bit word), which gives
value * 2**-126 (E2M1's subnormal 0.5 lands on a subnormal), then apply exact power-of-two
multiplies: one by 2**(s-1) when every scale byte is <= 128 (WIDE=False), else 2**126 and
then 2**(s-127). FP32/BF16 multiplies keep subnormals (Triton emits mul.f32 without .ftz).
DECODE selects the decoder: 0 fp32, 1 asm, 2 Triton's tl.dot_scaled, 3 asm with even/odd K
halves in two dots.

INTERPRET=True keeps all arithmetic, dots included, in float32: Triton's CPU interpreter
stores BF16 as raw uint16 and cannot multiply or dot it. On the GPU the decoded tile is
cast to BF16 (exact: an MXFP4 value has 2 significant bits) and fed to the tensor cores.
"""

import triton
import triton.language as tl


@triton.jit
def _scale_bits(s, WIDE: tl.constexpr):
    """float32 bit pattern (uint32) of the per-block multiplier for values decoded as value * 2**-126.

    WIDE=False (every scale byte <= 128): one factor 2**(s-1), finite and normal for s in
    0..128 (s=0 gives 0.5). WIDE=True (any byte): 2**126 then 2**(s-127), where 2**-127 is
    the float32 subnormal 0x00400000. Byte 255 (NaN in E8M0) gives NaN either way. Each
    pattern's low 16 bits are zero, so its high half is the same multiplier in BF16.
    """
    s = s.to(tl.uint32)
    if WIDE:
        bits = tl.where(s == 0, 0x00400000, s << 23)
    else:
        bits = (s + 126) << 23
    return tl.where(s == 255, 0x7FC00000, bits)


@triton.jit
def _scale_factor(s, WIDE: tl.constexpr):
    """`_scale_bits` as float32."""
    return _scale_bits(s, WIDE).to(tl.float32, bitcast=True)


@triton.jit
def _apply(raw_bits, f, WIDE: tl.constexpr):
    v = raw_bits.to(tl.float32, bitcast=True)
    if WIDE:
        v = v * 8.507059173023462e37  # 2**126
    return v * f


@triton.jit
def _to_bf16_rne(x):
    """float32 -> bfloat16, round to nearest even, in integer ops (the CPU interpreter's own
    float32 -> bfloat16 cast truncates; this keeps CPU and GPU results identical)."""
    b = x.to(tl.uint32, bitcast=True)
    r = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return r.to(tl.uint16).to(tl.bfloat16, bitcast=True)


@triton.jit
def _pair_bits(t):
    """uint32 t: nibbles at bits 0..3 and 16..19 -> two BF16 bit patterns (value * 2**-126)."""
    return ((t << 6) & 0x01C001C0) | ((t << 12) & 0x80008000)


@triton.jit
def _dequant_tile(wq, s, WIDE: tl.constexpr):
    """Decode one tile.

    wq: int32/uint32 [BN, NB, 4] packed words (8 values each; 4 words = one 32-element block)
    s:  uint8 [BN, NB] scale bytes
    returns float32 [BN, NB * 32] in natural K order.
    """
    f = _scale_factor(s, WIDE)[:, :, None]
    wq = wq.to(tl.uint32, bitcast=True)
    p0 = _pair_bits(wq)  # pair j = (element j, element j + 4) of the word
    p1 = _pair_bits(wq >> 4)
    p2 = _pair_bits(wq >> 8)
    p3 = _pair_bits(wq >> 12)
    lo0 = _apply(p0 << 16, f, WIDE)
    lo1 = _apply(p1 << 16, f, WIDE)
    lo2 = _apply(p2 << 16, f, WIDE)
    lo3 = _apply(p3 << 16, f, WIDE)
    hi0 = _apply(p0 & 0xFFFF0000, f, WIDE)
    hi1 = _apply(p1 & 0xFFFF0000, f, WIDE)
    hi2 = _apply(p2 & 0xFFFF0000, f, WIDE)
    hi3 = _apply(p3 & 0xFFFF0000, f, WIDE)
    # join appends a dim of 2 (the last-added is the fastest when flattened).
    # element q = 4*h + 2*b1 + b0 of a word, so join over h first, then b1, then b0.
    v = tl.join(tl.join(tl.join(lo0, hi0), tl.join(lo2, hi2)), tl.join(tl.join(lo1, hi1), tl.join(lo3, hi3)))
    BN: tl.constexpr = wq.shape[0]
    NB: tl.constexpr = wq.shape[1]
    return tl.reshape(v, (BN, NB * 32))


# PTX: four packed bytes (8 values) -> low-nibble and high-nibble values as BF16x2 pairs
# times the block factor. Bytes go to 16-bit lanes (prmt), E2M1 bits are moved into BF16 bit
# positions (value * 2**-126, as in _pair_bits), one mul.rn.bf16x2 applies 2**(s-1).
_DECODE4 = tl.constexpr("""
{
.reg .b32 a, b, m, t;
prmt.b32 a, $4, 0, 0x4140;
prmt.b32 b, $4, 0, 0x4342;
shl.b32 m, a, 6; and.b32 m, m, 0x01C001C0; shl.b32 t, a, 12; lop3.b32 m, m, t, 0x80008000, 0xF8; mul.rn.bf16x2 $0, m, $5;
shl.b32 m, b, 6; and.b32 m, m, 0x01C001C0; shl.b32 t, b, 12; lop3.b32 m, m, t, 0x80008000, 0xF8; mul.rn.bf16x2 $1, m, $6;
shl.b32 m, a, 2; and.b32 m, m, 0x01C001C0; shl.b32 t, a, 8; lop3.b32 m, m, t, 0x80008000, 0xF8; mul.rn.bf16x2 $2, m, $5;
shl.b32 m, b, 2; and.b32 m, m, 0x01C001C0; shl.b32 t, b, 8; lop3.b32 m, m, t, 0x80008000, 0xF8; mul.rn.bf16x2 $3, m, $6;
}
""")


@triton.jit
def _dequant_halves_asm(wb, s, WIDE: tl.constexpr):
    """GPU-only decoder (inline PTX, BF16 arithmetic) of the same values as _dequant_tile.

    wb: uint8 [BN, NB, 16] packed bytes; s: uint8 [BN, NB]; returns two bfloat16
    [BN, NB * 16] tiles: the even elements (low nibbles) and the odd ones (high nibbles).
    WIDE=False needs every scale byte <= 128 (one multiply by 2**(s-1)); WIDE=True multiplies
    by 2**126 first, then by 2**(s-127) (0x0040, a BF16 subnormal, for s=0).
    """
    s = s.to(tl.uint32)
    if WIDE:
        fb = tl.where(s == 0, 0x40, s << 7)
    else:
        fb = (s + 126) << 7
    fb = tl.where(s == 255, 0x7FC0, fb)
    f = fb.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    if WIDE:
        f2 = tl.full(f.shape, 2.0**126, tl.float32).to(tl.bfloat16)
        fsel = f2
    else:
        fsel = f
    fb3 = tl.broadcast_to(fsel[:, :, None], wb.shape)
    lo, hi = tl.inline_asm_elementwise(
        _DECODE4, "=r,=r,=r,=r,r,r,r", [wb, fb3], dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4
    )
    if WIDE:
        fw = tl.broadcast_to(f[:, :, None], wb.shape)
        lo = lo * fw
        hi = hi * fw
    BN: tl.constexpr = wb.shape[0]
    NB: tl.constexpr = wb.shape[1]
    return tl.reshape(lo, (BN, NB * 16)), tl.reshape(hi, (BN, NB * 16))


@triton.jit
def _dequant_tile_asm(wb, s, WIDE: tl.constexpr):
    """_dequant_halves_asm put back in natural K order (lo/hi interleave): bfloat16 [BN, NB * 32]."""
    lo, hi = _dequant_halves_asm(wb, s, WIDE)
    BN: tl.constexpr = lo.shape[0]
    return tl.reshape(tl.join(lo, hi), (BN, 2 * lo.shape[1]))


@triton.jit
def _load_b_tile(w_ptr, s_ptr, rows, row_mask, k0, stride_w, stride_s, BK: tl.constexpr):
    """Packed bytes [rows, BK/32, 16] and scale bytes [rows, BK/32] of a [rows, K] MXFP4 matrix."""
    NB: tl.constexpr = BK // 32
    nb = tl.arange(0, NB)
    bi = tl.arange(0, 16)
    boff = rows[:, None, None] * stride_w + (k0 // 2) + nb[None, :, None] * 16 + bi[None, None, :]
    wb = tl.load(w_ptr + boff, mask=row_mask[:, None, None], other=0)
    soff = rows[:, None] * stride_s + (k0 // 32) + nb[None, :]
    s = tl.load(s_ptr + soff, mask=row_mask[:, None], other=127)
    return wb, s


@triton.jit
def _load_w_tile(w_ptr, s_ptr, rows, row_mask, k0, stride_w, stride_s, BK: tl.constexpr):
    """Packed words and scale bytes of rows x [k0, k0+BK) for a [rows, K] MXFP4 matrix."""
    NB: tl.constexpr = BK // 32
    nb = tl.arange(0, NB)
    wi = tl.arange(0, 4)
    woff = rows[:, None, None] * stride_w + (k0 // 8) + nb[None, :, None] * 4 + wi[None, None, :]
    wq = tl.load(w_ptr + woff, mask=row_mask[:, None, None], other=0)
    soff = rows[:, None] * stride_s + (k0 // 32) + nb[None, :]
    s = tl.load(s_ptr + soff, mask=row_mask[:, None], other=127)
    return wq, s


@triton.jit
def _dequant_kernel(
    w_ptr,
    s_ptr,
    out_ptr,
    R,
    K,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    OUT_BF16: tl.constexpr,
    WIDE: tl.constexpr,
    DECODE: tl.constexpr,
):
    """Exposes `_dequant_tile` for the exactness tests: out[R, K] = dequantize(w, s)."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    k0 = tl.program_id(1) * BLOCK_K
    rmask = rows < R
    if DECODE == 1:
        wb, s = _load_b_tile(w_ptr, s_ptr, rows, rmask, k0, K // 2, K // 32, BLOCK_K)
        v = _dequant_tile_asm(wb, s, WIDE).to(tl.float32)
    else:
        wq, s = _load_w_tile(w_ptr, s_ptr, rows, rmask, k0, K // 8, K // 32, BLOCK_K)
        v = _dequant_tile(wq, s, WIDE)
    cols = k0 + tl.arange(0, BLOCK_K)
    optr = out_ptr + rows[:, None] * K + cols[None, :]
    if OUT_BF16:
        tl.store(optr, _to_bf16_rne(v), mask=rmask[:, None])
    else:
        tl.store(optr, v, mask=rmask[:, None])


@triton.jit(do_not_specialize=["P", "MAX_SLOTS"])
def _align_kernel(
    ids_ptr,
    sorted_pairs_ptr,
    block_expert_ptr,
    num_blocks_ptr,
    scratch_ptr,
    P,
    MAX_SLOTS,
    cnt_ptr,
    N_CNT,
    BLOCK_T: tl.constexpr,
    P_PAD: tl.constexpr,
    E_PAD: tl.constexpr,
    SLOTS_PAD: tl.constexpr,
):
    """Group pairs by expert: blocks of BLOCK_T pair ids, one expert per block, sentinel P as padding.
    Also zeroes the N_CNT tile counters of the fused epilogues (`_last_of`), before any reads them."""
    for c0 in range(0, N_CNT, 1024):
        c = c0 + tl.arange(0, 1024)
        tl.store(cnt_ptr + c, tl.zeros([1024], tl.int32), mask=c < N_CNT)
    offs = tl.arange(0, P_PAD)
    valid = offs < P
    ids = tl.load(ids_ptr + offs, mask=valid, other=0)
    counts = tl.histogram(ids, E_PAD, mask=valid)
    nblk = (counts + BLOCK_T - 1) // BLOCK_T
    blk_start = tl.cumsum(nblk, 0) - nblk
    cnt_start = tl.cumsum(counts, 0) - counts
    tl.store(num_blocks_ptr, tl.sum(nblk, 0))
    # slot of a pair = its rank in expert order + padding of the blocks before its expert
    tl.store(scratch_ptr + tl.arange(0, E_PAD), blk_start * BLOCK_T - cnt_start)
    so = tl.arange(0, SLOTS_PAD)
    tl.store(sorted_pairs_ptr + so, tl.zeros([SLOTS_PAD], tl.int32) + P, mask=so < MAX_SLOTS)
    tl.debug_barrier()
    keys = tl.where(valid, ids * P_PAD + offs, E_PAD * P_PAD)
    keys = tl.sort(keys)
    kvalid = keys < E_PAD * P_PAD
    sid = keys // P_PAD
    spair = keys % P_PAD
    slot = offs + tl.load(scratch_ptr + sid, mask=kvalid, other=0)
    tl.store(sorted_pairs_ptr + slot, spair, mask=kvalid)
    tl.store(block_expert_ptr + slot // BLOCK_T, sid, mask=kvalid & (slot % BLOCK_T == 0))


@triton.jit
def _block_pairs(sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr, P, BLOCK_T: tl.constexpr):
    b = tl.program_id(0)
    # .cg (L2, not L1): with programmatic dependent launch this runs before the kernel waits
    nblocks = tl.load(num_blocks_ptr, cache_modifier=".cg")
    e = tl.load(block_expert_ptr + b, mask=b < nblocks, other=0, cache_modifier=".cg")
    pairs = tl.load(
        sorted_pairs_ptr + b * BLOCK_T + tl.arange(0, BLOCK_T), mask=b < nblocks, other=P, cache_modifier=".cg"
    )
    return b < nblocks, e.to(tl.int64), pairs, pairs < P


@triton.jit
def _decoded_tile(
    w_ptr,
    s_ptr,
    rows,
    rmask,
    k0,
    stride_w,
    stride_s,
    BLOCK_K: tl.constexpr,
    DECODE: tl.constexpr,
    INTERPRET: tl.constexpr,
    WIDE: tl.constexpr,
):
    """Decoded [rows, BLOCK_K] weight tile for the dot: BF16 on the GPU, float32 in the interpreter."""
    if DECODE == 1:
        wb, s = _load_b_tile(w_ptr, s_ptr, rows, rmask, k0, stride_w, stride_s, BLOCK_K)
        v = _dequant_tile_asm(wb, s, WIDE)
    else:
        wq, s = _load_w_tile(w_ptr, s_ptr, rows, rmask, k0, stride_w, stride_s, BLOCK_K)
        v = _dequant_tile(wq, s, WIDE)
        if not INTERPRET:
            v = v.to(tl.bfloat16)
    return v


@triton.jit
def _k_range(K, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr):
    """[k_lo, k_hi) of this program's split: the K steps shared out as evenly as possible."""
    steps = K // BLOCK_K
    sk = tl.program_id(2)
    return (sk * steps // SPLIT) * BLOCK_K, ((sk + 1) * steps // SPLIT) * BLOCK_K


@triton.jit
def _silu_mul(g, u, LIMIT: tl.constexpr):
    """act = silu(gate) * up, rounded to BF16: the one definition for every path (same bits).

    LIMIT > 0 clamps first, as vLLM's SiluAndMulWithClamp (swiglu_limit): gate to at most LIMIT,
    up to [-LIMIT, LIMIT], in float32. LIMIT 0: no clamp."""
    if LIMIT > 0:
        g = tl.minimum(g, LIMIT)
        u = tl.minimum(tl.maximum(u, -LIMIT), LIMIT)
    return _to_bf16_rne(g / (1.0 + tl.exp(-g)) * u)


@triton.jit
def _split_sums(part_ptr, offs, mask, split_stride, I, SPLIT: tl.constexpr):
    """Gate and up sums over the split-K partials part[s] (+offs, +I+offs), s in order; L2 loads
    (.cg), since the fused epilogue reads rows other programs wrote during this kernel."""
    g = tl.zeros(offs.shape, tl.float32)
    u = tl.zeros(offs.shape, tl.float32)
    for s in tl.static_range(SPLIT):
        g += tl.load(part_ptr + s * split_stride + offs, mask=mask, other=0.0, cache_modifier=".cg")
        u += tl.load(part_ptr + s * split_stride + I + offs, mask=mask, other=0.0, cache_modifier=".cg")
    return g, u


@triton.jit
def _last_of(cnt_ptr, expected):
    """True in the last of `expected` programs to call it for this counter. The barrier orders the
    program's earlier stores before its release; acq_rel makes the others' stores visible to the last."""
    tl.debug_barrier()
    return tl.atomic_add(cnt_ptr, 1, sem="acq_rel") == expected - 1


@triton.jit
def _store_w13(acc_g, acc_u, act_ptr, part_ptr, pairs, n, mask, P, I, SPLIT: tl.constexpr, LIMIT: tl.constexpr):
    """w13 epilogue ([n, pair] tiles): act = silu(gate) * up as BF16, or with SPLIT > 1 this
    split's float32 partial gate and up rows (part[split, pair, 0:2I]) for the reduce kernel."""
    if SPLIT == 1:
        tl.store(act_ptr + pairs[None, :].to(tl.int64) * I + n[:, None], _silu_mul(acc_g, acc_u, LIMIT), mask=mask)
    else:
        row = (tl.program_id(2) * P + pairs[None, :]).to(tl.int64) * (2 * I)
        tl.store(part_ptr + row + n[:, None], acc_g, mask=mask)
        tl.store(part_ptr + row + I + n[:, None], acc_u, mask=mask)


@triton.jit
def _store_w2(acc, y_ptr, pairs, n, mask, P, H):
    """w2 epilogue: float32 rows y[split, pair, n] for the top-k sum."""
    tl.store(y_ptr + (tl.program_id(2) * P + pairs[None, :]).to(tl.int64) * H + n[:, None], acc, mask=mask)


@triton.jit(do_not_specialize=["P", "TOPK"])
def _w13_silu_kernel(
    x_ptr,
    w_ptr,
    s_ptr,
    act_ptr,
    part_ptr,
    sorted_pairs_ptr,
    block_expert_ptr,
    num_blocks_ptr,
    P,
    H,
    I,
    TOPK,
    stride_w,
    stride_s,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DECODE: tl.constexpr,
    INTERPRET: tl.constexpr,
    WIDE: tl.constexpr,
    SPLIT: tl.constexpr,
    LIMIT: tl.constexpr = 0.0,
):
    """act[pair, n] = silu(x[tok] . Wg[e, n]) * (x[tok] . Wu[e, n]) for the pairs of one block.

    SPLIT > 1: program_id(2) takes 1/SPLIT of the K steps and stores its float32 partial sums
    of gate and up to part[split, pair, 0:2I]; `_silu_reduce_kernel` adds them in split order
    and applies SiLU-and-multiply.
    """
    active, e, pairs, pvalid = _block_pairs(sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr, P, BLOCK_T)
    if active:
        tok = pairs // TOPK
        n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        nmask = n < I
        rows_g = e * (2 * I) + n  # w13 = [gate; up] along the output dim
        rows_u = rows_g + I
        acc_g = tl.zeros([BLOCK_N, BLOCK_T], tl.float32)
        acc_u = tl.zeros([BLOCK_N, BLOCK_T], tl.float32)
        k_lo, k_hi = _k_range(H, BLOCK_K, SPLIT)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            kk = k0 + tl.arange(0, BLOCK_K)
            xt = tl.load(x_ptr + tok[None, :].to(tl.int64) * H + kk[:, None], mask=pvalid[None, :], other=0.0)
            if DECODE == 2:  # Triton's own MXFP4 upcast (tl.dot_scaled)
                kb = k0 // 2 + tl.arange(0, BLOCK_K // 2)
                ks = k0 // 32 + tl.arange(0, BLOCK_K // 32)
                wg = tl.load(w_ptr + rows_g[:, None] * stride_w + kb[None, :], mask=nmask[:, None], other=0)
                sg = tl.load(s_ptr + rows_g[:, None] * stride_s + ks[None, :], mask=nmask[:, None], other=127)
                wu = tl.load(w_ptr + rows_u[:, None] * stride_w + kb[None, :], mask=nmask[:, None], other=0)
                su = tl.load(s_ptr + rows_u[:, None] * stride_s + ks[None, :], mask=nmask[:, None], other=127)
                acc_g = tl.dot_scaled(wg, sg, "e2m1", xt, None, "bf16", acc_g)
                acc_u = tl.dot_scaled(wu, su, "e2m1", xt, None, "bf16", acc_u)
            elif DECODE == 3:  # inline-PTX decoder, even/odd K halves in two dots (no interleave)
                kh = k0 + 2 * tl.arange(0, BLOCK_K // 2)
                xrow = x_ptr + tok[None, :].to(tl.int64) * H
                xe = tl.load(xrow + kh[:, None], mask=pvalid[None, :], other=0.0)
                xo = tl.load(xrow + kh[:, None] + 1, mask=pvalid[None, :], other=0.0)
                wb, s = _load_b_tile(w_ptr, s_ptr, rows_g, nmask, k0, stride_w, stride_s, BLOCK_K)
                lo, hi = _dequant_halves_asm(wb, s, WIDE)
                acc_g = tl.dot(hi, xo, tl.dot(lo, xe, acc_g))
                wb, s = _load_b_tile(w_ptr, s_ptr, rows_u, nmask, k0, stride_w, stride_s, BLOCK_K)
                lo, hi = _dequant_halves_asm(wb, s, WIDE)
                acc_u = tl.dot(hi, xo, tl.dot(lo, xe, acc_u))
            else:  # decoders fp32 (0) and asm (1)
                if INTERPRET:
                    xt = xt.to(tl.float32)
                vg = _decoded_tile(
                    w_ptr, s_ptr, rows_g, nmask, k0, stride_w, stride_s, BLOCK_K, DECODE, INTERPRET, WIDE
                )
                vu = _decoded_tile(
                    w_ptr, s_ptr, rows_u, nmask, k0, stride_w, stride_s, BLOCK_K, DECODE, INTERPRET, WIDE
                )
                acc_g = tl.dot(vg, xt, acc_g)
                acc_u = tl.dot(vu, xt, acc_u)
        _store_w13(acc_g, acc_u, act_ptr, part_ptr, pairs, n, nmask[:, None] & pvalid[None, :], P, I, SPLIT, LIMIT)


@triton.jit
def _silu_reduce_kernel(part_ptr, act_ptr, P, I, SPLIT: tl.constexpr, BLOCK_I: tl.constexpr, LIMIT: tl.constexpr = 0.0):
    """act[pair] = silu(sum_s gate_s) * (sum_s up_s), splits added in order (deterministic)."""
    pair = tl.program_id(0).to(tl.int64)
    n = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    m = n < I
    g, u = _split_sums(part_ptr, pair * (2 * I) + n, m, P * (2 * I), I, SPLIT)
    tl.store(act_ptr + pair * I + n, _silu_mul(g, u, LIMIT), mask=m)


@triton.jit(do_not_specialize=["P"])
def _w2_kernel(
    act_ptr,
    w_ptr,
    s_ptr,
    y_ptr,
    sorted_pairs_ptr,
    block_expert_ptr,
    num_blocks_ptr,
    P,
    H,
    I,
    stride_w,
    stride_s,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DECODE: tl.constexpr,
    INTERPRET: tl.constexpr,
    WIDE: tl.constexpr,
    SPLIT: tl.constexpr,
):
    """y[split, pair, n] = act[pair, K-range of split] . W2[e, n, K-range] (float32), one block of pairs.

    `_topk_sum_kernel` adds the SPLIT partial rows.
    """
    active, e, pairs, pvalid = _block_pairs(sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr, P, BLOCK_T)
    if active:
        n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        nmask = n < H
        rows = e * H + n
        acc = tl.zeros([BLOCK_N, BLOCK_T], tl.float32)
        k_lo, k_hi = _k_range(I, BLOCK_K, SPLIT)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            kk = k0 + tl.arange(0, BLOCK_K)
            at = tl.load(act_ptr + pairs[None, :].to(tl.int64) * I + kk[:, None], mask=pvalid[None, :], other=0.0)
            if DECODE == 2:  # Triton's own MXFP4 upcast (tl.dot_scaled)
                kb = k0 // 2 + tl.arange(0, BLOCK_K // 2)
                ks = k0 // 32 + tl.arange(0, BLOCK_K // 32)
                w = tl.load(w_ptr + rows[:, None] * stride_w + kb[None, :], mask=nmask[:, None], other=0)
                s = tl.load(s_ptr + rows[:, None] * stride_s + ks[None, :], mask=nmask[:, None], other=127)
                acc = tl.dot_scaled(w, s, "e2m1", at, None, "bf16", acc)
            elif DECODE == 3:
                kh = k0 + 2 * tl.arange(0, BLOCK_K // 2)
                arow = act_ptr + pairs[None, :].to(tl.int64) * I
                ae = tl.load(arow + kh[:, None], mask=pvalid[None, :], other=0.0)
                ao = tl.load(arow + kh[:, None] + 1, mask=pvalid[None, :], other=0.0)
                wb, s = _load_b_tile(w_ptr, s_ptr, rows, nmask, k0, stride_w, stride_s, BLOCK_K)
                lo, hi = _dequant_halves_asm(wb, s, WIDE)
                acc = tl.dot(hi, ao, tl.dot(lo, ae, acc))
            else:
                if INTERPRET:
                    at = at.to(tl.float32)
                v = _decoded_tile(w_ptr, s_ptr, rows, nmask, k0, stride_w, stride_s, BLOCK_K, DECODE, INTERPRET, WIDE)
                acc = tl.dot(v, at, acc)
        _store_w2(acc, y_ptr, pairs, n, nmask[:, None] & pvalid[None, :], P, H)


@triton.jit
def _topk_sum_kernel(y_ptr, wts_ptr, out_ptr, P, H, TOPK: tl.constexpr, BLOCK_H: tl.constexpr, SPLIT: tl.constexpr):
    """out[t] = sum_j wts[t, j] * (sum_s y[s, t*TOPK + j]), j and s in order (deterministic)."""
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    _topk_sum_row(y_ptr, wts_ptr, out_ptr, tl.program_id(0).to(tl.int64), cols, cols < H, P, H, TOPK, SPLIT, BLOCK_H)


@triton.jit
def _topk_sum_row(
    y_ptr, wts_ptr, out_ptr, t, cols, cmask, P, H, TOPK: tl.constexpr, SPLIT: tl.constexpr, BLOCK: tl.constexpr
):
    """out[t, cols] = sum_j wts[t, j] * (sum_s y[s, t*TOPK + j, cols]), j and s in order: the one
    definition of the sum, for the top-k kernel and for w2's fused epilogue (same bits)."""
    acc = tl.zeros([BLOCK], tl.float32)
    for j in tl.static_range(TOPK):
        wj = tl.load(wts_ptr + t * TOPK + j)
        yj = tl.load(y_ptr + (t * TOPK + j) * H + cols, mask=cmask, other=0.0, cache_modifier=".cg")
        for s in tl.static_range(1, SPLIT):
            yj += tl.load(y_ptr + (s * P + t * TOPK + j) * H + cols, mask=cmask, other=0.0, cache_modifier=".cg")
        acc += wj * yj
    tl.store(out_ptr + t * H + cols, _to_bf16_rne(acc), mask=cmask)
