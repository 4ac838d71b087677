"""Gluon kernels for experts in the "frag" layout: no shared memory, no barrier in the K loop.

Same inputs and outputs as `frag_kernels.py` (whose `_frag_tile` documents the byte order), the
same decoded values bit for bit (the products add their K steps in another order: results agree
within 2e-3). What Gluon adds is control of layouts, which plain Triton does not give:
- each warp owns one row group (16 rows) of the tile; each lane loads its own 32 bytes per
  chunk as 32-bit words, decodes them in registers, and the decoded values already are its
  operand of the tensor-core product (`convert_layout(..., assert_trivial=True)`: compiling
  fails otherwise);
- the activation tile is loaded straight into the product's second-operand registers (each
  warp its own copy, from L1), so nothing goes through shared memory and warps never wait for
  one another: mma.sync (m16n8k16) instead of the warpgroup-wide wgmma, whose second operand
  must sit in shared memory behind a barrier every K step;
- the next K step's words are loaded before this step is decoded (registers whose layout is
  kept across iterations: plain Triton re-shuffles a loop-carried tile every step).
GPU only (inline PTX decoder; Gluon has no CPU interpreter): the CPU tests run frag_kernels.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from .frag_kernels import _decode_ptx

# operands: $4 $5 the word (twice: pack=2), $6 $7 row g's factor, $8 $9 row g+8's
_DECODE_NARROW = gl.constexpr(_decode_ptx(False, "$6", "$8"))
_DECODE_WIDE = gl.constexpr(_decode_ptx(True, "$6", "$8"))


@gluon.jit
def _lane_chunks(
    ptr, rg0, kch, KCH_TOTAL, PER_LANE: gl.constexpr, VEC: gl.constexpr, NCH: gl.constexpr, NUM_WARPS: gl.constexpr, ok
):
    """[32 * NUM_WARPS, PER_LANE * NCH] elements of row groups rg0 .. rg0+NUM_WARPS (one per warp),
    chunks kch .. kch+NCH, where each lane owns PER_LANE contiguous elements per chunk (32 * PER_LANE
    a chunk): row = warp * 32 + lane, loaded VEC at a time. ok=False: nothing read (zeros)."""
    L: gl.constexpr = gl.BlockedLayout([1, VEC], [32, 1], [NUM_WARPS, 1], [1, 0])
    r = gl.arange(0, 32 * NUM_WARPS, layout=gl.SliceLayout(1, L))
    b = gl.arange(0, PER_LANE * NCH, layout=gl.SliceLayout(0, L))
    chunk = ((rg0 + r // 32) * KCH_TOTAL + kch).to(gl.int64) * (32 * PER_LANE) + (r % 32) * PER_LANE
    return gl.load(ptr + chunk[:, None] + ((b // PER_LANE) * (32 * PER_LANE) + b % PER_LANE)[None, :], mask=ok, other=0)


@gluon.jit
def _load_words(w_ptr, rg0, kch, KCH_TOTAL, NCH: gl.constexpr, NUM_WARPS: gl.constexpr, ok=True):
    """The weight words (int32 view): each lane's 32 bytes per chunk, as two 16-byte loads."""
    return _lane_chunks(w_ptr, rg0, kch, KCH_TOTAL, 8, 4, NCH, NUM_WARPS, ok)


@gluon.jit
def _load_scales(s_ptr, rg0, kch, KCH_TOTAL, NCH: gl.constexpr, NUM_WARPS: gl.constexpr, ok=True):
    """The scale bytes of the same tile: per lane and chunk, rows g and g + 8."""
    return _lane_chunks(s_ptr, rg0, kch, KCH_TOTAL, 2, 2, NCH, NUM_WARPS, ok)


@gluon.jit
def _load_step(w_ptr, s_ptr, rg0, kch, KCH_TOTAL, NCH: gl.constexpr, NUM_WARPS: gl.constexpr, ok=True):
    """One K step of a tile: its words and their scales."""
    return (
        _load_words(w_ptr, rg0, kch, KCH_TOTAL, NCH, NUM_WARPS, ok),
        _load_scales(s_ptr, rg0, kch, KCH_TOTAL, NCH, NUM_WARPS, ok),
    )


@gluon.jit
def _decode_a(words, s, NCH: gl.constexpr, NUM_WARPS: gl.constexpr, WIDE: gl.constexpr, A_LAYOUT: gl.constexpr):
    """`frag_kernels._frag_tile` (ASM) on loaded words: [16 * NUM_WARPS, 128 * NCH] BF16 in the
    mma A-operand layout, columns in the fragment's logical K order."""
    MW: gl.constexpr = NUM_WARPS
    KS: gl.constexpr = NCH * 8
    w = gl.reshape(words, [MW, 8, 4, KS])  # (warp, g, c, k16 step)
    # the high halves of `triton_kernels._scale_bits` (BF16 multipliers), in both halves of a word
    h = s.to(gl.int32)
    if WIDE:
        h = gl.where(h == 255, 0x7FC0, gl.where(h == 0, 0x0040, h << 7))
    else:
        h = gl.where(h == 255, 0x7FC0, (h + 126) << 7)
    f0, f1 = gl.split(gl.reshape(h | (h << 16), [MW, 8, 4, NCH, 2]))  # rows g, g + 8
    f0 = gl.reshape(gl.join(gl.join(f0, f0), gl.join(f0, f0)), [MW, 8, 4, NCH, 4])
    f1 = gl.reshape(gl.join(gl.join(f1, f1), gl.join(f1, f1)), [MW, 8, 4, NCH, 4])
    f0 = gl.convert_layout(gl.reshape(gl.join(f0, f0), [MW, 8, 4, KS]), w.type.layout, assert_trivial=True)
    f1 = gl.convert_layout(gl.reshape(gl.join(f1, f1), [MW, 8, 4, KS]), w.type.layout, assert_trivial=True)
    w2 = gl.join(w, w)
    f0 = gl.join(f0, f0)
    f1 = gl.join(f1, f1)
    if WIDE:
        p0, p1, p2, p3 = gl.inline_asm_elementwise(
            _DECODE_WIDE, "=r,=r,=r,=r,r,r,r,r,r,r", [w2, f0, f1], dtype=(gl.bfloat16,) * 4, is_pure=True, pack=2
        )
    else:
        p0, p1, p2, p3 = gl.inline_asm_elementwise(
            _DECODE_NARROW, "=r,=r,=r,=r,r,r,r,r,r,r", [w2, f0, f1], dtype=(gl.bfloat16,) * 4, is_pure=True, pack=2
        )
    # pair p = m3 + 2 k3 (rows g / g+8, k 2c / 2c+8), its halves k0
    v = gl.join(gl.join(p0, p1), gl.join(p2, p3))  # [MW, g, c, KS, k0, m3, k3]
    v = gl.permute(v, (0, 5, 1, 3, 6, 2, 4))  # [MW, m3, g, KS, k3, c, k0]
    return gl.convert_layout(gl.reshape(v, [MW * 16, KS * 16]), A_LAYOUT, assert_trivial=True)


@gluon.jit
def _load_b(
    ptr, rows, rmask, k0, stride, BT: gl.constexpr, NCH: gl.constexpr, NUM_WARPS: gl.constexpr, B_LAYOUT: gl.constexpr
):
    """[128 NCH, BT] second operand, straight into its mma registers: column t is
    ptr[rows[t] * stride + k0 + real(k)], k in the fragment's logical order. Lane (g, c) needs
    columns g (and g + 8) at real K 32 c .. 32 c + 31 of each chunk: loaded as 16-byte vectors.
    rows, rmask: [BT] from `_b_rows` (convert once, outside the K loop)."""
    # a leading dim of 1 takes the warps: every warp holds the whole tile (its own mma operand)
    L: gl.constexpr = gl.BlockedLayout([1, 1, 1, 1, 8], [1, 8, 1, 4, 1], [NUM_WARPS, 1, 1, 1, 1], [4, 3, 2, 1, 0])
    ch = gl.arange(0, NCH, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, gl.SliceLayout(4, L)))))
    c = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(4, L)))))
    o = gl.arange(0, 32, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, L)))))
    offs = (
        rows[None, :, None, None, None].to(gl.int64) * stride
        + k0
        + ch[None, None, :, None, None] * 128
        + c[None, None, None, :, None] * 32
        + o[None, None, None, None, :]
    )
    x = gl.load(ptr + offs, mask=rmask[None, :, None, None, None], other=0.0)  # [1, BT, chunk, c, 32 real]
    x = gl.reshape(x, [BT, NCH, 4, 8, 2, 2])  # real = 4 j + 2 k3 + k0
    x = gl.permute(x, (1, 3, 4, 2, 5, 0))  # logical (chunk, j, k3, c, k0)
    return gl.convert_layout(gl.reshape(x, [NCH * 128, BT]), B_LAYOUT, assert_trivial=True)


@gluon.jit
def _b_rows(v, NUM_WARPS: gl.constexpr):
    """A [BT] vector in the layout `_load_b` takes its rows and mask in."""
    L: gl.constexpr = gl.BlockedLayout([1, 1, 1, 1, 8], [1, 8, 1, 4, 1], [NUM_WARPS, 1, 1, 1, 1], [4, 3, 2, 1, 0])
    return gl.convert_layout(v, gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, L)))))


@gluon.jit
def _dequant_gluon_kernel(w_ptr, s_ptr, out_ptr, K, NCH: gl.constexpr, WIDE: gl.constexpr, NUM_WARPS: gl.constexpr):
    """Exactness tests: out[R, K] (natural order, float32) = the decoded frag-layout matrix, as the
    A operand holds it (NUM_WARPS row groups x 128 NCH columns per program)."""
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, 8])
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    rg0 = gl.program_id(0) * NUM_WARPS
    kch = gl.program_id(1) * NCH
    a = _decode_a(
        _load_words(w_ptr, rg0, kch, K // 128, NCH, NUM_WARPS),
        _load_scales(s_ptr, rg0, kch, K // 128, NCH, NUM_WARPS),
        NCH,
        NUM_WARPS,
        WIDE,
        A_LAYOUT,
    )
    r = rg0 * 16 + gl.arange(0, 16 * NUM_WARPS, layout=gl.SliceLayout(1, A_LAYOUT))
    lk = gl.arange(0, 128 * NCH, layout=gl.SliceLayout(0, A_LAYOUT))
    real = kch * 128 + (lk // 128) * 128 + ((lk // 2) % 4) * 32 + ((lk // 16) % 8) * 4 + ((lk // 8) % 2) * 2 + lk % 2
    gl.store(out_ptr + r[:, None].to(gl.int64) * K + real[None, :], a.to(gl.float32))


@gluon.jit
def _num_blocks(num_blocks_ptr, P, DIRECT: gl.constexpr):
    """Blocks in this call: align's count, or DIRECT (no align) one per pair."""
    if DIRECT:
        return P
    return gl.load(num_blocks_ptr, cache_modifier=".cg")


@gluon.jit
def _block(
    sorted_pairs_ptr,
    block_expert_ptr,
    num_blocks_ptr,
    b,
    P,
    BT: gl.constexpr,
    LAYOUT: gl.constexpr,
    DIRECT: gl.constexpr,
):
    """`triton_kernels._block_pairs` for block b: active, expert, pair ids [BT] (in LAYOUT), pair
    mask. L2 loads (.cg): with programmatic dependent launch they may run before the wait.
    DIRECT (no align; an expert two tokens share is read once per pair): block b is pair b alone, its expert read
    from the routing (block_expert_ptr = topk_ids) without align and without a count."""
    if DIRECT:
        slot = gl.arange(0, BT, layout=LAYOUT)
        pairs = gl.where(slot == 0, b, P)
        e = gl.load(block_expert_ptr + b, cache_modifier=".cg")
        return b < P, e.to(gl.int64), pairs, pairs < P
    nblocks = _num_blocks(num_blocks_ptr, P, DIRECT)
    e = gl.load(block_expert_ptr + b, mask=b < nblocks, other=0, cache_modifier=".cg")
    pairs = gl.load(
        sorted_pairs_ptr + b * BT + gl.arange(0, BT, layout=LAYOUT), mask=b < nblocks, other=P, cache_modifier=".cg"
    )
    return b < nblocks, e.to(gl.int64), pairs, pairs < P


@gluon.jit
def _split_start(steps, j, SPLIT: gl.constexpr, TAPER: gl.constexpr):
    """First K step of split j (j = SPLIT: steps). Even: steps shared out as evenly as possible.
    TAPER: each split >= 1 step, the rest shared by 1 - (1 - j / SPLIT)^2, earlier splits longer."""
    if TAPER:
        return j + (steps - SPLIT) * (SPLIT * SPLIT - (SPLIT - j) * (SPLIT - j)) // (SPLIT * SPLIT)
    return j * steps // SPLIT


@gluon.jit
def _k_steps(K, sk, BK: gl.constexpr, SPLIT: gl.constexpr, TAPER: gl.constexpr = False):
    """[k_lo, k_hi) of split sk (`_split_start`). TAPER: the GPU starts split 0's programs first,
    so the programs that start last, and end the launch, are short."""
    steps = K // BK
    return _split_start(steps, sk, SPLIT, TAPER) * BK, _split_start(steps, sk + 1, SPLIT, TAPER) * BK


_GDC_WAIT = gl.constexpr("griddepcontrol.wait; // $0")
_GDC_LAUNCH = gl.constexpr("griddepcontrol.launch_dependents; // $0")


@gluon.jit
def _pdl_wait_and_release():
    """Programmatic dependent launch: wait for the kernel before (its outputs are read after this),
    then let the next one start its prologue. No-ops when launched without the attribute."""
    gl.inline_asm_elementwise(_GDC_WAIT, "=r", [], dtype=gl.int32, is_pure=False, pack=1)
    gl.inline_asm_elementwise(_GDC_LAUNCH, "=r", [], dtype=gl.int32, is_pure=False, pack=1)


_GLOBALTIMER = gl.constexpr("mov.u64 $0, %globaltimer;")
_SMID = gl.constexpr("mov.u32 $0, %smid;")


@gluon.jit
def _now():
    """The GPU's global nanosecond clock (the same on every SM)."""
    return gl.inline_asm_elementwise(_GLOBALTIMER, "=l", [], dtype=gl.int64, is_pure=False, pack=1)


@gluon.jit
def _program_index():
    return (gl.program_id(0) * gl.num_programs(1) + gl.program_id(1)) * gl.num_programs(2) + gl.program_id(2)


@gluon.jit
def _trace(trace_ptr, t0):
    """TRACE (`tools/timeline.py`): this program's start, end and SM, at trace_ptr[4 * program]
    + 0, 2, 3 (+ 1: `_trace_loop_end`)."""
    t1 = _now()
    sm = gl.inline_asm_elementwise(_SMID, "=r", [], dtype=gl.int32, is_pure=False, pack=1)
    row = trace_ptr + 4 * _program_index()
    gl.store(row, t0)
    gl.store(row + 2, t1)
    gl.store(row + 3, sm.to(gl.int64))


@gluon.jit
def _trace_loop_end(trace_ptr, TRACE: gl.constexpr):
    """TRACE: when this program's K loop ended (before its stores and fused epilogue)."""
    if TRACE:
        gl.store(trace_ptr + 4 * _program_index() + 1, _now())


@gluon.jit
def _last_program(cnt_ptr, expected):
    """`triton_kernels._last_of`: true in the last of `expected` programs to reach this counter."""
    gl.thread_barrier()
    last = gl.atomic_add(cnt_ptr, 1, sem="acq_rel") == expected - 1
    gl.store(cnt_ptr, 0, mask=last)  # nobody else reads it in this call: zero for the next
    return last


@gluon.jit
def _silu_mul_bf16(g, u, LIMIT: gl.constexpr):
    """`triton_kernels._silu_mul` (LIMIT > 0: vLLM's swiglu_limit clamp first)."""
    if LIMIT > 0:
        g = gl.minimum(g, LIMIT)
        u = gl.minimum(gl.maximum(u, -LIMIT), LIMIT)
    return (g / (1.0 + gl.exp(-g)) * u).to(gl.bfloat16)


@gluon.jit
def _w13_tile(
    x_ptr,
    w_ptr,
    s_ptr,
    act_ptr,
    part_ptr,
    cnt_ptr,
    trace_ptr,
    e,
    pairs,
    pvalid,
    b,
    nb,
    sk,
    n_tiles,
    P,
    H,
    I,
    TOPK,
    BT: gl.constexpr,
    NCH: gl.constexpr,
    WIDE: gl.constexpr,
    SPLIT: gl.constexpr,
    NUM_WARPS: gl.constexpr,
    DEPTH: gl.constexpr,
    FUSE: gl.constexpr,
    TAPER: gl.constexpr,
    TRACE: gl.constexpr,
    LIMIT: gl.constexpr,
):
    """Rows nb * 16 NUM_WARPS .. of gate and of up for block b's pairs, split sk: act (SPLIT 1) or
    this split's partial sums, then with FUSE the last split's reduce (cnt_ptr[b * n_tiles + nb])."""
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, 8])
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    B_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=MMA, k_width=2)
    BK: gl.constexpr = NCH * 128
    BN: gl.constexpr = 16 * NUM_WARPS
    tok = _b_rows(pairs // TOPK, NUM_WARPS)
    tmask = _b_rows(pvalid, NUM_WARPS)
    n0 = nb * BN
    rg_g = (e * (2 * I) + n0) // 16
    rg_u = rg_g + I // 16
    KCH = H // 128
    k_lo, k_hi = _k_steps(H, sk, BK, SPLIT, TAPER)
    acc_g = gl.zeros([BN, BT], gl.float32, layout=MMA)
    acc_u = gl.zeros([BN, BT], gl.float32, layout=MMA)
    # words in flight: step k (w*0) and, DEPTH 2, step k + 1 (w*1); the last steps reload the last
    wg0, sg0 = _load_step(w_ptr, s_ptr, rg_g, k_lo // 128, KCH, NCH, NUM_WARPS)
    wu0, su0 = _load_step(w_ptr, s_ptr, rg_u, k_lo // 128, KCH, NCH, NUM_WARPS)
    k1 = gl.minimum(k_lo + BK, k_hi - BK) // 128
    wg1, sg1 = _load_step(w_ptr, s_ptr, rg_g, k1, KCH, NCH, NUM_WARPS)
    wu1, su1 = _load_step(w_ptr, s_ptr, rg_u, k1, KCH, NCH, NUM_WARPS)
    for k0 in range(k_lo, k_hi, BK):
        kn = gl.minimum(k0 + DEPTH * BK, k_hi - BK) // 128
        wgn, sgn = _load_step(w_ptr, s_ptr, rg_g, kn, KCH, NCH, NUM_WARPS)
        wun, sun = _load_step(w_ptr, s_ptr, rg_u, kn, KCH, NCH, NUM_WARPS)
        xb = _load_b(x_ptr, tok, tmask, k0, H, BT, NCH, NUM_WARPS, B_LAYOUT)
        acc_g = gl.nvidia.ampere.mma_v2(_decode_a(wg0, sg0, NCH, NUM_WARPS, WIDE, A_LAYOUT), xb, acc_g)
        acc_u = gl.nvidia.ampere.mma_v2(_decode_a(wu0, su0, NCH, NUM_WARPS, WIDE, A_LAYOUT), xb, acc_u)
        if DEPTH == 2:
            wg0 = wg1
            sg0 = sg1
            wu0 = wu1
            su0 = su1
            wg1 = wgn
            sg1 = sgn
            wu1 = wun
            su1 = sun
        else:
            wg0 = wgn
            sg0 = sgn
            wu0 = wun
            su0 = sun
    _trace_loop_end(trace_ptr, TRACE)
    n = n0 + gl.arange(0, BN, layout=gl.SliceLayout(1, MMA))
    mask = pvalid[None, :]
    if SPLIT == 1:
        gl.store(act_ptr + pairs[None, :].to(gl.int64) * I + n[:, None], _silu_mul_bf16(acc_g, acc_u, LIMIT), mask=mask)
    else:
        row = pairs[None, :].to(gl.int64) * (2 * I) + n[:, None]
        stride = P * (2 * I)
        gl.store(part_ptr + sk * stride + row, acc_g, mask=mask)
        gl.store(part_ptr + sk * stride + row + I, acc_u, mask=mask)
        if FUSE:
            if _last_program(cnt_ptr + b * n_tiles + nb, SPLIT):
                g = gl.zeros([BN, BT], gl.float32, layout=MMA)
                u = gl.zeros([BN, BT], gl.float32, layout=MMA)
                for sp in gl.static_range(SPLIT):  # in order: `_silu_reduce_kernel`'s sum
                    g += gl.load(part_ptr + sp * stride + row, mask=mask, other=0.0, cache_modifier=".cg")
                    u += gl.load(part_ptr + sp * stride + row + I, mask=mask, other=0.0, cache_modifier=".cg")
                gl.store(act_ptr + pairs[None, :].to(gl.int64) * I + n[:, None], _silu_mul_bf16(g, u, LIMIT), mask=mask)


@gluon.jit
def _w2_first_words(
    w_ptr,
    s_ptr,
    e,
    nb,
    sk,
    H,
    I,
    ok,
    NCH: gl.constexpr,
    SPLIT: gl.constexpr,
    NUM_WARPS: gl.constexpr,
    TAPER: gl.constexpr,
):
    """The words and scales of a w2 tile's first two K steps (nothing read when not ok): loaded
    before the kernel waits for w13 (programmatic dependent launch)."""
    BK: gl.constexpr = NCH * 128
    rg = (e * H + nb * 16 * NUM_WARPS) // 16
    k_lo, k_hi = _k_steps(I, sk, BK, SPLIT, TAPER)
    k1 = gl.minimum(k_lo + BK, k_hi - BK) // 128
    w0, s0 = _load_step(w_ptr, s_ptr, rg, k_lo // 128, I // 128, NCH, NUM_WARPS, ok)
    w1, s1 = _load_step(w_ptr, s_ptr, rg, k1, I // 128, NCH, NUM_WARPS, ok)
    return w0, s0, w1, s1


@gluon.jit
def _w2_tile(
    act_ptr,
    w_ptr,
    s_ptr,
    y_ptr,
    cnt_ptr,
    num_blocks_ptr,
    wts_ptr,
    out_ptr,
    trace_ptr,
    e,
    pairs,
    pvalid,
    nb,
    sk,
    w0,
    s0,
    w1,
    s1,
    P,
    H,
    I,
    T,
    BT: gl.constexpr,
    NCH: gl.constexpr,
    WIDE: gl.constexpr,
    SPLIT: gl.constexpr,
    NUM_WARPS: gl.constexpr,
    DEPTH: gl.constexpr,
    FUSE: gl.constexpr,
    TOPK: gl.constexpr,
    TAPER: gl.constexpr,
    DIRECT: gl.constexpr,
    TRACE: gl.constexpr,
):
    """Rows nb * 16 NUM_WARPS .. of w2 for block b's pairs, split sk, from the first words
    (`_w2_first_words`); y rows, then with FUSE the column tile's top-k sum by its last program."""
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, 8])
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    B_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=MMA, k_width=2)
    BK: gl.constexpr = NCH * 128
    BN: gl.constexpr = 16 * NUM_WARPS
    prow = _b_rows(pairs, NUM_WARPS)
    pmask = _b_rows(pvalid, NUM_WARPS)
    n0 = nb * BN
    rg = (e * H + n0) // 16
    KCH = I // 128
    k_lo, k_hi = _k_steps(I, sk, BK, SPLIT, TAPER)
    acc = gl.zeros([BN, BT], gl.float32, layout=MMA)
    for k0 in range(k_lo, k_hi, BK):
        kn = gl.minimum(k0 + DEPTH * BK, k_hi - BK) // 128
        wn, sn = _load_step(w_ptr, s_ptr, rg, kn, KCH, NCH, NUM_WARPS)
        ab = _load_b(act_ptr, prow, pmask, k0, I, BT, NCH, NUM_WARPS, B_LAYOUT)
        acc = gl.nvidia.ampere.mma_v2(_decode_a(w0, s0, NCH, NUM_WARPS, WIDE, A_LAYOUT), ab, acc)
        if DEPTH == 2:
            w0 = w1
            s0 = s1
            w1 = wn
            s1 = sn
        else:
            w0 = wn
            s0 = sn
    _trace_loop_end(trace_ptr, TRACE)
    n = n0 + gl.arange(0, BN, layout=gl.SliceLayout(1, MMA))
    gl.store(y_ptr + (sk * P + pairs[None, :]).to(gl.int64) * H + n[:, None], acc, mask=pvalid[None, :])
    if FUSE:
        if _last_program(cnt_ptr + nb, _num_blocks(num_blocks_ptr, P, DIRECT) * SPLIT):
            cols = n0 + gl.arange(0, BN, layout=gl.SliceLayout(1, MMA))
            for t in range(0, T):  # `triton_kernels._topk_sum_row`, the same order
                tt = t.to(gl.int64)
                o = gl.zeros([BN], gl.float32, layout=gl.SliceLayout(1, MMA))
                for j in gl.static_range(TOPK):
                    wj = gl.load(wts_ptr + tt * TOPK + j)
                    yj = gl.load(y_ptr + (tt * TOPK + j) * H + cols, cache_modifier=".cg")
                    for sp in gl.static_range(1, SPLIT):
                        yj += gl.load(y_ptr + (sp * P + tt * TOPK + j) * H + cols, cache_modifier=".cg")
                    o += wj * yj
                gl.store(out_ptr + tt * H + cols, o.to(gl.bfloat16))


@gluon.jit(do_not_specialize=["P", "TOPK", "PAIR0"])
def _w13_gluon_kernel(
    x_ptr,
    w_ptr,
    s_ptr,
    act_ptr,
    part_ptr,
    sorted_pairs_ptr,
    block_expert_ptr,
    num_blocks_ptr,
    cnt_ptr,
    trace_ptr,
    P,
    H,
    I,
    TOPK,
    PAIR0,
    BT: gl.constexpr,
    NCH: gl.constexpr,
    WIDE: gl.constexpr,
    SPLIT: gl.constexpr,
    NUM_WARPS: gl.constexpr,
    DEPTH: gl.constexpr,
    PDL: gl.constexpr,
    FUSE: gl.constexpr,
    TAPER: gl.constexpr = False,
    DIRECT: gl.constexpr = False,
    TRACE: gl.constexpr = False,
    LIMIT: gl.constexpr = 0.0,
):
    """`frag_kernels._w13_frag_kernel`: grid (block, row tile, split), one row group of gate and
    one of up per warp. w_ptr: the frag-layout words (int32 view). DEPTH: K steps whose words are
    in registers ahead of the one being decoded (1 or 2). FUSE with SPLIT > 1: the last split of
    a tile adds the partials in order and writes act (cnt_ptr zeroed by align). DIRECT: one block
    per pair, no align (`_block`). TRACE: `_trace` at trace_ptr. PAIR0: this launch's first block (a
    direct call on several streams launches each kernel once per part of its pairs; 0 otherwise)."""
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, 8])
    if TRACE:
        t0 = _now()
    if PDL:
        _pdl_wait_and_release()  # align's blocks are read below
    b = gl.program_id(0) + PAIR0
    active, e, pairs, pvalid = _block(
        sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr, b, P, BT, gl.SliceLayout(0, MMA), DIRECT
    )
    if active:
        _w13_tile(
            x_ptr,
            w_ptr,
            s_ptr,
            act_ptr,
            part_ptr,
            cnt_ptr,
            trace_ptr,
            e,
            pairs,
            pvalid,
            b,
            gl.program_id(1),
            gl.program_id(2),
            gl.num_programs(1),
            P,
            H,
            I,
            TOPK,
            BT,
            NCH,
            WIDE,
            SPLIT,
            NUM_WARPS,
            DEPTH,
            FUSE,
            TAPER,
            TRACE,
            LIMIT,
        )
    if TRACE:
        _trace(trace_ptr, t0)


@gluon.jit(do_not_specialize=["P", "T", "PAIR0"])
def _w2_gluon_kernel(
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
    trace_ptr,
    P,
    H,
    I,
    T,
    PAIR0,
    BT: gl.constexpr,
    NCH: gl.constexpr,
    WIDE: gl.constexpr,
    SPLIT: gl.constexpr,
    NUM_WARPS: gl.constexpr,
    DEPTH: gl.constexpr,
    PDL: gl.constexpr,
    FUSE: gl.constexpr,
    TOPK: gl.constexpr,
    TAPER: gl.constexpr = False,
    DIRECT: gl.constexpr = False,
    TRACE: gl.constexpr = False,
):
    """`frag_kernels._w2_frag_kernel`: grid (block, row tile, split). PDL: the blocks (align's,
    done before w13 began) are read and the first words loaded before waiting for w13's act.
    FUSE: the last program of a column tile writes out[:, tile] as `_topk_sum_kernel` does.
    TRACE: `_trace` at trace_ptr. PAIR0: as in w13."""
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, 8])
    if TRACE:
        t0 = _now()
    active, e, pairs, pvalid = _block(
        sorted_pairs_ptr,
        block_expert_ptr,
        num_blocks_ptr,
        gl.program_id(0) + PAIR0,
        P,
        BT,
        gl.SliceLayout(0, MMA),
        DIRECT,
    )
    w0, s0, w1, s1 = _w2_first_words(
        w_ptr, s_ptr, e, gl.program_id(1), gl.program_id(2), H, I, active, NCH, SPLIT, NUM_WARPS, TAPER
    )
    if PDL:
        _pdl_wait_and_release()  # act is w13's output
    if active:
        _w2_tile(
            act_ptr,
            w_ptr,
            s_ptr,
            y_ptr,
            cnt_ptr,
            num_blocks_ptr,
            wts_ptr,
            out_ptr,
            trace_ptr,
            e,
            pairs,
            pvalid,
            gl.program_id(1),
            gl.program_id(2),
            w0,
            s0,
            w1,
            s1,
            P,
            H,
            I,
            T,
            BT,
            NCH,
            WIDE,
            SPLIT,
            NUM_WARPS,
            DEPTH,
            FUSE,
            TOPK,
            TAPER,
            DIRECT,
            TRACE,
        )
    if TRACE:
        _trace(trace_ptr, t0)
