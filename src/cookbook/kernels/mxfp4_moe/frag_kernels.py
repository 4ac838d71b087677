"""Triton kernels for experts in the "frag" layout (`frag_layout.py` says what it is and why).

The same four launches as the converter layout (`triton_kernels.py`: align, w13 + SiLU,
w2, top-k sum, and the split-K reduce); only the two expert kernels differ:
- a weight tile is loaded as [c, g, row group, 16-byte halves, 16 bytes]: 32 contiguous bytes
  per lane and chunk, in the dimension order for which Triton's own load layout (vectors on
  the last dimension, lanes over the first two, warps over the third) is the tensor-core A
  fragment, so no thread ever holds another's values (any other order costs a
  shared-memory shuffle of every tile: `tests/benchmarks/mxfp4_moe/test_mxfp4_moe_sass.py` guards it);
- `_frag_tile` decodes it (inline PTX on the GPU, integer + float32 ops in the CPU
  interpreter: the same bits either way) and reshapes it to [BLOCK_N, BLOCK_K], which
  Triton lays out as the wgmma register operand without moving data;
- the activation tile (x for w13, act for w2) is permuted in registers to the fragment's
  K order (`_k_permuted_tile`) before it becomes the shared-memory operand;
- with PREFETCH = d > 0 each K step first asks L2 for the tile d steps ahead (a hint: no
  registers). Register double buffering does not work here: Triton gives a loop-carried
  tile a layout of its own and re-shuffles it every step; its software pipelining
  (num_stages > 1) stages the bytes through shared memory, with the same cost.
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from . import frag_layout as FL
from .triton_kernels import (
    _apply,
    _block_pairs,
    _k_range,
    _last_of,
    _scale_bits,
    _scale_factor,
    _silu_mul,
    _split_sums,
    _store_w2,
    _store_w13,
    _to_bf16_rne,
    _topk_sum_row,
)

# PTX of the GPU decoder. Word $4 -> pairs 0..3 as BF16x2 value * 2**-126 (rotations, one merge
# and masks: frag_layout says how the bits are placed), each times its row's factor: $5 (row g:
# pairs 0, 2) or $7 (row g + 8: pairs 1, 3). One multiply by 2**(s-1) when every scale byte is
# <= 128 (narrow); else 2**126 (0x7E80) first, then 2**(s-127) (wide).
_M = f"0x{FL.PAIR_MASK:08X}"
_PAIR_PTX = (
    f"and.b32 a, $4, {_M};",
    f"shf.l.wrap.b32 a, $4, $4, {FL.PAIR_ROT}; and.b32 a, a, {_M};",
    # u: rotl(q, U_ROT[0]) where U_SELECT is 1, else rotl(q, U_ROT[1]); lop3 0xE4 = (a & c) | (b & ~c)
    f"shf.l.wrap.b32 a, $4, $4, {FL.U_ROT[0]}; shf.l.wrap.b32 b, $4, $4, {FL.U_ROT[1]}; "
    f"lop3.b32 u, a, b, 0x{FL.U_SELECT:08X}, 0xE4; and.b32 a, u, {_M};",
    f"shf.l.wrap.b32 a, u, u, {FL.PAIR_ROT}; and.b32 a, a, {_M};",
)


def _decode_ptx(wide: bool, f_even: str = "$5", f_odd: str = "$7") -> str:
    """The decoder as one asm block; f_even / f_odd name the operands holding the factors of rows g
    and g + 8 (they differ with how the caller packs its operands)."""
    regs = ".reg .b32 a, b, u, w;\nmov.b32 w, 0x7E807E80;" if wide else ".reg .b32 a, b, u;"
    pre = "mul.rn.bf16x2 a, a, w; " if wide else ""
    lines = [f"{ptx} {pre}mul.rn.bf16x2 ${p}, a, {f_even if p % 2 == 0 else f_odd};" for p, ptx in enumerate(_PAIR_PTX)]
    return "\n{\n" + regs + "\n" + "\n".join(lines) + "\n}\n"


_DECODE_NARROW = tl.constexpr(_decode_ptx(False))
_DECODE_WIDE = tl.constexpr(_decode_ptx(True))
_PAIR_MASK = tl.constexpr(FL.PAIR_MASK)
_PAIR_ROT = tl.constexpr(FL.PAIR_ROT)
_U_ROT0 = tl.constexpr(FL.U_ROT[0])
_U_ROT1 = tl.constexpr(FL.U_ROT[1])
_U_SELECT = tl.constexpr(FL.U_SELECT)
_U_OTHER = tl.constexpr(~FL.U_SELECT & 0xFFFFFFFF)


@triton.jit
def _rotl(q, r: tl.constexpr):
    return (q << r) | (q >> (32 - r))


@triton.jit
def _pairs_fp32(q):
    """uint32 words -> pairs 0..3 as BF16x2 bit patterns (value * 2**-126), as the PTX makes them."""
    u = (_rotl(q, _U_ROT0) & _U_SELECT) | (_rotl(q, _U_ROT1) & _U_OTHER)
    return q & _PAIR_MASK, _rotl(q, _PAIR_ROT) & _PAIR_MASK, u & _PAIR_MASK, _rotl(u, _PAIR_ROT) & _PAIR_MASK


@triton.jit
def _bf16x2_factor(s, WIDE: tl.constexpr):
    """Scale byte -> the BF16x2 multiplier (the same value in both halves) as int32 bits."""
    h = _scale_bits(s, WIDE) >> 16
    return (h | (h << 16)).to(tl.int32, bitcast=True)


@triton.jit
def _frag_tile(
    w_ptr,
    s_ptr,
    rg0,
    kch0,
    KCH_TOTAL,
    MW: tl.constexpr,
    NCH: tl.constexpr,
    ASM: tl.constexpr,
    WIDE: tl.constexpr,
    INTERPRET: tl.constexpr = True,
):
    """Rows 16*rg0 .. 16*(rg0+MW) x K chunks kch0 .. kch0+NCH of a frag-layout matrix, decoded:
    [MW*16, NCH*128], BF16 (ASM) or float32 (the interpreter), columns in the fragment's
    logical K order (`_k_permuted_tile` puts the activations in the same order)."""
    KS: tl.constexpr = NCH * 8
    # Dims ordered (c, g, MW, ...) so that Triton's default load layout (16-byte vectors on the
    # last dim, then lanes over dims 0 and 1, warps over dim 2) is already the fragment layout
    # (lane = 4 g + c, warp = row group): any other order makes Triton move every weight tile
    # through shared memory (ldmatrix rounds with barriers) to reach it.
    ic = tl.arange(0, 4)[:, None, None, None, None]
    ig = tl.arange(0, 8)[None, :, None, None, None]
    i0 = tl.arange(0, MW)[None, None, :, None, None]
    chunk = ((rg0 + i0) * KCH_TOTAL + kch0).to(tl.int64)  # [1, 1, MW, 1, 1]
    lane = ig * 4 + ic
    s = tl.load(
        s_ptr
        + (chunk + tl.arange(0, NCH)[None, None, None, :, None]) * 64
        + lane * 2
        + tl.arange(0, 2)[None, None, None, None, :]
    )  # [c, g, MW, NCH, m3]
    s = tl.permute(s, (2, 1, 0, 3, 4))  # [MW, g, c, NCH, m3]
    ih = tl.arange(0, 2 * NCH)[None, None, None, :, None]  # 16-byte halves of a lane's 32
    if ASM:
        wb = tl.load(
            w_ptr + (chunk + ih // 2) * 1024 + lane * 32 + (ih % 2) * 16 + tl.arange(0, 16)[None, None, None, None, :]
        )  # bytes [c, g, MW, 2 NCH, 16]
        wb = tl.permute(wb, (2, 1, 0, 3, 4))
        wb = tl.reshape(wb, [MW, 8, 4, KS, 4])  # byte b = 2*m3 + k0
        f = _bf16x2_factor(s, WIDE)  # [MW, g, c, NCH, m3]
        f = tl.broadcast_to(tl.reshape(f, [MW, 8, 4, NCH, 1, 2, 1]), [MW, 8, 4, NCH, 8, 2, 2])
        f = tl.reshape(f, [MW, 8, 4, KS, 4])
        if WIDE:
            lo, hi = tl.inline_asm_elementwise(
                _DECODE_WIDE, "=r,=r,=r,=r,r,r,r,r,r", [wb, f], dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4
            )
        else:
            lo, hi = tl.inline_asm_elementwise(
                _DECODE_NARROW, "=r,=r,=r,=r,r,r,r,r,r", [wb, f], dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4
            )
        v = tl.reshape(tl.join(lo, hi), [MW, 8, 4, KS, 2, 2, 2])  # (m3, k0, k3)
    else:
        q = tl.load(
            w_ptr + (chunk + ih // 2) * 256 + lane * 8 + (ih % 2) * 4 + tl.arange(0, 4)[None, None, None, None, :]
        )  # int32 words [c, g, MW, 2 NCH, 4]
        q = tl.reshape(tl.permute(q, (2, 1, 0, 3, 4)), [MW, 8, 4, KS]).to(tl.uint32, bitcast=True)
        f = _scale_factor(s, WIDE)  # float32 [MW, g, c, NCH, m3]
        f0, f1 = tl.split(f)
        f0 = tl.reshape(tl.broadcast_to(f0[:, :, :, :, None], [MW, 8, 4, NCH, 8]), [MW, 8, 4, KS])
        f1 = tl.reshape(tl.broadcast_to(f1[:, :, :, :, None], [MW, 8, 4, NCH, 8]), [MW, 8, 4, KS])
        o0, o1, o2, o3 = _pairs_fp32(q)
        p0 = tl.join(_apply(o0 << 16, f0, WIDE), _apply(o0 & 0xFFFF0000, f0, WIDE))  # [.., k0]
        p1 = tl.join(_apply(o1 << 16, f1, WIDE), _apply(o1 & 0xFFFF0000, f1, WIDE))
        p2 = tl.join(_apply(o2 << 16, f0, WIDE), _apply(o2 & 0xFFFF0000, f0, WIDE))
        p3 = tl.join(_apply(o3 << 16, f1, WIDE), _apply(o3 & 0xFFFF0000, f1, WIDE))
        v = tl.join(tl.join(p0, p1), tl.join(p2, p3))  # [.., k0, m3, k3]
        v = tl.permute(v, (0, 1, 2, 3, 5, 4, 6))  # [.., m3, k0, k3]
        if not INTERPRET:
            v = v.to(tl.bfloat16)  # exact: a decoded value has 2 significant bits
    v = tl.permute(v, (0, 4, 1, 3, 6, 2, 5))  # [MW, m3, g, KS, k3, c, k0]
    return tl.reshape(v, [MW * 16, KS * 16])


@triton.jit
def _frag_prefetch(w_ptr, s_ptr, rg0, kch0, KCH_TOTAL, MW: tl.constexpr, NCH: tl.constexpr):
    """Ask L2 for a later tile (each lane its 32 bytes per chunk, and the scales): the loads of
    that step then hit L2 instead of waiting on HBM. A hint: no registers, no layout; the
    kernels stay free of loop-carried tiles (whose layout Triton would not keep)."""
    i0 = tl.arange(0, MW)[:, None, None, None]
    ig = tl.arange(0, 8)[None, :, None, None]
    ic = tl.arange(0, 4)[None, None, :, None]
    chunk = ((rg0 + i0) * KCH_TOTAL + kch0).to(tl.int64) + tl.arange(0, NCH)[None, None, None, :]
    lane = ig * 4 + ic
    tl.inline_asm_elementwise(
        "prefetch.global.L2 [$1]; mov.u32 $0, 0;",
        "=r,l",
        [w_ptr + chunk * 1024 + lane * 32],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )
    tl.inline_asm_elementwise(
        "prefetch.global.L2 [$1]; mov.u32 $0, 0;",
        "=r,l",
        [s_ptr + chunk * 64 + lane * 2],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _prefetch_ahead(
    w_ptr, s_ptr, rg0, k0, k_hi, KCH_TOTAL, MW: tl.constexpr, BLOCK_K: tl.constexpr, PREFETCH: tl.constexpr
):
    """`_frag_prefetch` of the tile PREFETCH K steps after k0 (the last tile once past the end).
    (One bulk request per row group, cp.async.bulk.prefetch.L2, was tried instead: 0.6-0.86x, slower
    than each lane asking for its own bytes.)"""
    if PREFETCH > 0:
        kp = tl.minimum(k0 + PREFETCH * BLOCK_K, k_hi - BLOCK_K) // 128
        _frag_prefetch(w_ptr, s_ptr, rg0, kp, KCH_TOTAL, MW, BLOCK_K // 128)


@triton.jit
def _k_permuted_tile(ptr, rows, rmask, k0, stride, BT: tl.constexpr, BK: tl.constexpr, INTERPRET: tl.constexpr):
    """[BK, BT] operand: ptr[rows[t] * stride + k0 + real(k)] with k in the fragment's logical order.

    Within each 128-chunk, logical k = 16 j + 8 k3 + 2 c + k0 holds real K 32 c + 4 j + 2 k3 + k0.
    The load is contiguous; the permutation is a register reshape (free on the GPU)."""
    t = tl.load(
        ptr + rows[:, None].to(tl.int64) * stride + k0 + tl.arange(0, BK)[None, :], mask=rmask[:, None], other=0.0
    )
    if INTERPRET:
        t = t.to(tl.float32)
    t = tl.reshape(t, [BT, BK // 128, 4, 8, 2, 2])  # real (kch, c, j, k3, k0)
    t = tl.permute(t, (0, 1, 3, 4, 2, 5))  # logical (kch, j, k3, c, k0)
    return tl.trans(tl.reshape(t, [BT, BK]))


@triton.jit
def _real_k(BK: tl.constexpr):
    """Real K offset of each logical column of a decoded tile (used where columns are stored)."""
    lk = tl.arange(0, BK)
    return (lk // 128) * 128 + ((lk // 2) % 4) * 32 + ((lk // 16) % 8) * 4 + ((lk // 8) % 2) * 2 + lk % 2


@triton.jit
def _dequant_frag_kernel(
    w_ptr,
    s_ptr,
    out_ptr,
    R,
    K,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    OUT_BF16: tl.constexpr,
    WIDE: tl.constexpr,
    ASM: tl.constexpr,
):
    """Exactness tests: out[R, K] (natural order) = the decoded frag-layout matrix."""
    rg0 = tl.program_id(0) * (BLOCK_R // 16)
    kch0 = tl.program_id(1) * (BLOCK_K // 128)
    v = _frag_tile(w_ptr, s_ptr, rg0, kch0, K // 128, BLOCK_R // 16, BLOCK_K // 128, ASM, WIDE).to(tl.float32)
    rows = rg0 * 16 + tl.arange(0, BLOCK_R)
    cols = kch0 * 128 + _real_k(BLOCK_K)
    optr = out_ptr + rows[:, None].to(tl.int64) * K + cols[None, :]
    if OUT_BF16:
        tl.store(optr, _to_bf16_rne(v))
    else:
        tl.store(optr, v)


@triton.jit(do_not_specialize=["P", "TOPK"])
def _w13_frag_kernel(
    x_ptr,
    w_ptr,
    s_ptr,
    act_ptr,
    part_ptr,
    sorted_pairs_ptr,
    block_expert_ptr,
    num_blocks_ptr,
    cnt_ptr,
    P,
    H,
    I,
    TOPK,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    ASM: tl.constexpr,
    INTERPRET: tl.constexpr,
    WIDE: tl.constexpr,
    SPLIT: tl.constexpr,
    PREFETCH: tl.constexpr = 0,
    PDL: tl.constexpr = False,
    FUSE: tl.constexpr = False,
    LIMIT: tl.constexpr = 0.0,
):
    """`triton_kernels._w13_silu_kernel` for frag-layout weights (same outputs, bit for bit
    the same decoded values; BLOCK_N divides I, BLOCK_K is a multiple of 128).
    FUSE with SPLIT > 1: the last split of a tile (cnt_ptr, zeroed by align) adds the partials
    and writes act, as `_silu_reduce_kernel` would (same order, same bits)."""
    if PDL:
        gdc_wait()  # align's blocks are read below
        gdc_launch_dependents()
    active, e, pairs, pvalid = _block_pairs(sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr, P, BLOCK_T)
    if active:
        tok = pairs // TOPK
        n0 = tl.program_id(1) * BLOCK_N
        rg_g = (e * (2 * I) + n0) // 16  # w13 = [gate; up] along the output rows
        rg_u = rg_g + I // 16
        MW: tl.constexpr = BLOCK_N // 16
        acc_g = tl.zeros([BLOCK_N, BLOCK_T], tl.float32)
        acc_u = tl.zeros([BLOCK_N, BLOCK_T], tl.float32)
        k_lo, k_hi = _k_range(H, BLOCK_K, SPLIT)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            _prefetch_ahead(w_ptr, s_ptr, rg_g, k0, k_hi, H // 128, MW, BLOCK_K, PREFETCH)
            _prefetch_ahead(w_ptr, s_ptr, rg_u, k0, k_hi, H // 128, MW, BLOCK_K, PREFETCH)
            xt = _k_permuted_tile(x_ptr, tok, pvalid, k0, H, BLOCK_T, BLOCK_K, INTERPRET)
            wg = _frag_tile(w_ptr, s_ptr, rg_g, k0 // 128, H // 128, MW, BLOCK_K // 128, ASM, WIDE, INTERPRET)
            acc_g = tl.dot(wg, xt, acc_g)
            wu = _frag_tile(w_ptr, s_ptr, rg_u, k0 // 128, H // 128, MW, BLOCK_K // 128, ASM, WIDE, INTERPRET)
            acc_u = tl.dot(wu, xt, acc_u)
        # BLOCK_N divides I: every row of the tile is real, only pairs are masked
        n = n0 + tl.arange(0, BLOCK_N)
        _store_w13(acc_g, acc_u, act_ptr, part_ptr, pairs, n, pvalid[None, :], P, I, SPLIT, LIMIT)
        if FUSE and SPLIT > 1:
            if _last_of(cnt_ptr + tl.program_id(0) * tl.num_programs(1) + tl.program_id(1), SPLIT):
                g, u = _split_sums(
                    part_ptr, pairs[None, :].to(tl.int64) * (2 * I) + n[:, None], pvalid[None, :], P * (2 * I), I, SPLIT
                )
                tl.store(
                    act_ptr + pairs[None, :].to(tl.int64) * I + n[:, None], _silu_mul(g, u, LIMIT), mask=pvalid[None, :]
                )


@triton.jit(do_not_specialize=["P", "T"])
def _w2_frag_kernel(
    act_ptr,
    w_ptr,
    s_ptr,
    y_ptr,
    sorted_pairs_ptr,
    block_expert_ptr,
    num_blocks_ptr,
    cnt_ptr,
    wts_ptr,
    out_ptr,
    P,
    H,
    I,
    T,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    ASM: tl.constexpr,
    INTERPRET: tl.constexpr,
    WIDE: tl.constexpr,
    SPLIT: tl.constexpr,
    PREFETCH: tl.constexpr = 0,
    PDL: tl.constexpr = False,
    FUSE: tl.constexpr = False,
    TOPK: tl.constexpr = 1,
):
    """`triton_kernels._w2_kernel` for frag-layout weights (BLOCK_N divides H).
    PDL: the blocks (align's, finished before w13 began) are read before waiting for w13.
    FUSE: the last program of a column tile (cnt_ptr[pid 1], over all blocks and splits) writes
    out[:, tile] as `_topk_sum_kernel` would (same order, same bits)."""
    active, e, pairs, pvalid = _block_pairs(sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr, P, BLOCK_T)
    n0 = tl.program_id(1) * BLOCK_N
    rg = (e * H + n0) // 16
    MW: tl.constexpr = BLOCK_N // 16
    k_lo, k_hi = _k_range(I, BLOCK_K, SPLIT)
    if PDL:
        gdc_wait()  # act is w13's output
        gdc_launch_dependents()
    if active:
        acc = tl.zeros([BLOCK_N, BLOCK_T], tl.float32)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            _prefetch_ahead(w_ptr, s_ptr, rg, k0, k_hi, I // 128, MW, BLOCK_K, PREFETCH)
            at = _k_permuted_tile(act_ptr, pairs, pvalid, k0, I, BLOCK_T, BLOCK_K, INTERPRET)
            w = _frag_tile(w_ptr, s_ptr, rg, k0 // 128, I // 128, MW, BLOCK_K // 128, ASM, WIDE, INTERPRET)
            acc = tl.dot(w, at, acc)
        _store_w2(acc, y_ptr, pairs, n0 + tl.arange(0, BLOCK_N), pvalid[None, :], P, H)
        if FUSE:
            if _last_of(cnt_ptr + tl.program_id(1), tl.load(num_blocks_ptr, cache_modifier=".cg") * SPLIT):
                cols = n0 + tl.arange(0, BLOCK_N)
                for t in range(0, T):
                    _topk_sum_row(
                        y_ptr,
                        wts_ptr,
                        out_ptr,
                        tl.full((), 0, tl.int64) + t,
                        cols,
                        cols < H,
                        P,
                        H,
                        TOPK,
                        SPLIT,
                        BLOCK_N,
                    )
