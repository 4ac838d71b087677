"""Stream-K Gluon kernels: one wave of programs, each streaming an equal share of the K steps.

The grid kernels (`gluon_kernels.py`) give every (block, row tile, split) its own program. At
1-4 tokens that is one to three waves of short programs, and a wave's last programs run while
most of the card waits: each expert kernel costs ~9 us more than its bytes (breakdown, run 14).
Here the work of a kernel is one list of units, unit = (tile, K step), tile = (block, row
tile), ordered tile by tile, and program p of G (G = SMs x programs per SM: one wave) takes
units [p W / G, (p + 1) W / G), W = the list's length (from align's block count, on the device).
Every program reads the same bytes to within one K step, so all finish together; the next
unit's words are loaded while this one is decoded, across tile boundaries too.

A tile cut between programs ("segments") is finished by the last of them to arrive (tile
counter, zeroed by align): each segment's accumulator goes to its program's slot (0: the tile
its range starts in, 1: the tile it ends in; a range has at most two partial tiles) and the
last adds the slots in program order, which is K order: the same bits whatever the arrival
order. Segment sums are in another order than the grid kernels' split-K: results agree within
float32 rounding of the partial sums (tests: 2e-3, as the split kernels).

w2 writes y [P, H] (one row per pair) and, per column tile, the last finished tile does the
top-k sum (`_w2_tile`'s FUSE epilogue, the same order).
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from .gluon_kernels import (_b_rows, _decode_a, _last_program, _load_b, _load_step, _pdl_wait_and_release,
                            _silu_mul_bf16)


@gluon.jit
def _span(p, W, G):
    """Units [lo, hi) of program p of G over W units (as even as integer division allows); empty
    for p >= G (G may be below the launch's program count when W is)."""
    lo = gl.minimum(p.to(gl.int64) * W // G, W).to(gl.int32)
    return lo, gl.minimum((p + 1).to(gl.int64) * W // G, W).to(gl.int32)


@gluon.jit
def _owner(u, W, G):
    """The program whose span holds unit u: the largest p with p W // G <= u."""
    return (((u + 1).to(gl.int64) * G - 1) // W).to(gl.int32)


@gluon.jit
def _tile_row_group(block_expert_ptr, t, ROWS_PER_E, NT: gl.constexpr, NUM_WARPS: gl.constexpr):
    """First row group of tile t (block t // NT's expert, row tile t % NT); ROWS_PER_E: rows of one
    expert's matrix."""
    e = gl.load(block_expert_ptr + t // NT).to(gl.int64)
    return (e * ROWS_PER_E + (t % NT) * (16 * NUM_WARPS)) // 16


@gluon.jit
def _next_unit(u, u_end, hi, rg, rg_next, t, KS: gl.constexpr, NCH: gl.constexpr):
    """Row group and chunk of the unit after u (u's own again at the span's end): the next K step of
    this tile, else the next tile's first (a later tile of a span starts at its K step 0). No load
    here: an address that waits on a load puts the next words behind this step's wait."""
    un = gl.minimum(u + 1, hi - 1)
    in_tile = un < u_end                    # selects, not branches: the loop stays one basic block
    return gl.where(in_tile, rg, rg_next), gl.where(in_tile, (un - t * KS) * NCH, 0)


@gluon.jit
def _tile_pairs(sorted_pairs_ptr, t, P, DIV, BT: gl.constexpr, NT: gl.constexpr, NUM_WARPS: gl.constexpr,
                MMA: gl.constexpr):
    """Tile t's block: pair ids and mask in the accumulator's column layout, then the B operand's
    rows (pair // DIV) and mask in `_load_b`'s layout (converted here, once per tile)."""
    pairs = gl.load(sorted_pairs_ptr + (t // NT) * BT + gl.arange(0, BT, layout=gl.SliceLayout(0, MMA)))
    return pairs, pairs < P, _b_rows(pairs // DIV, NUM_WARPS), _b_rows(pairs < P, NUM_WARPS)


@gluon.jit
def _slot_offsets(p, slot, part, BN: gl.constexpr, BT: gl.constexpr, MMA: gl.constexpr):
    """Offsets of accumulator `part` (w13: 0 gate, 1 up) in program p's slot (two per program)."""
    n = gl.arange(0, BN, layout=gl.SliceLayout(1, MMA))
    c = gl.arange(0, BT, layout=gl.SliceLayout(0, MMA))
    return ((p * 2 + slot) * 2 + part).to(gl.int64) * (BN * BT) + n[:, None] * BT + c[None, :]


@gluon.jit
def _segments_sum(part_ptr, t, W, G, which, KS: gl.constexpr, BN: gl.constexpr, BT: gl.constexpr,
                  MMA: gl.constexpr):
    """Tile t's segment accumulators `which`, added in program (= K) order."""
    t0 = t * KS
    acc = gl.zeros([BN, BT], gl.float32, layout=MMA)
    for q in range(_owner(t0, W, G), _owner(t0 + KS - 1, W, G) + 1):
        lo_q = (q.to(gl.int64) * W // G).to(gl.int32)
        acc += gl.load(part_ptr + _slot_offsets(q, (lo_q < t0).to(gl.int32), which, BN, BT, MMA),
                       cache_modifier=".cg")
    return acc


@gluon.jit
def _segment_end(part_ptr, cnt_ptr, acc0, acc1, p, lo, u, t, W, G, TWO: gl.constexpr, KS: gl.constexpr,
                 BN: gl.constexpr, BT: gl.constexpr, MMA: gl.constexpr):
    """This program's segment of tile t ends at unit u. Returns (done, sums): done when the tile is
    complete here (whole in this span, or the last segment to arrive), sums its full K sums."""
    t0 = t * KS
    whole = (lo <= t0) & (u == t0 + KS - 1)
    if whole:
        done = whole
        s0 = acc0
        s1 = acc1
    else:
        slot = (lo < t0).to(gl.int32)
        gl.store(part_ptr + _slot_offsets(p, slot, 0, BN, BT, MMA), acc0)
        if TWO:
            gl.store(part_ptr + _slot_offsets(p, slot, 1, BN, BT, MMA), acc1)
        nseg = _owner(t0 + KS - 1, W, G) - _owner(t0, W, G) + 1
        done = _last_program(cnt_ptr + t, nseg)
        s0 = acc0
        s1 = acc1
        if done:
            s0 = _segments_sum(part_ptr, t, W, G, 0, KS, BN, BT, MMA)
            if TWO:
                s1 = _segments_sum(part_ptr, t, W, G, 1, KS, BN, BT, MMA)
    return done, s0, s1


@gluon.jit(do_not_specialize=["P", "TOPK"])
def _w13_stream_kernel(x_ptr, w_ptr, s_ptr, act_ptr, part_ptr, sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr,
                       cnt_ptr, P, H, I, TOPK, BT: gl.constexpr, NCH: gl.constexpr, WIDE: gl.constexpr,
                       KS: gl.constexpr, NT: gl.constexpr, NUM_WARPS: gl.constexpr, PDL: gl.constexpr):
    """act = silu(gate) * up over units (tile, K step), tile = (block, 16 NUM_WARPS rows of gate
    and the same rows of up), KS = H / (128 NCH) steps per tile, NT = I / (16 NUM_WARPS) tiles per
    block. part_ptr: 2 slots x 2 (gate, up) x [16 NUM_WARPS, BT] float32 per program; cnt_ptr: a
    counter per tile (zeroed by align)."""
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, 8])
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    B_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=MMA, k_width=2)
    BN: gl.constexpr = 16 * NUM_WARPS
    BK: gl.constexpr = NCH * 128
    if PDL:
        _pdl_wait_and_release()             # align's blocks are read below
    p = gl.program_id(0)
    W = gl.load(num_blocks_ptr) * (NT * KS)
    G = gl.minimum(gl.num_programs(0), W)   # programs past W units get none, the others >= 1
    lo, hi = _span(p, W, G)
    KCH = H // 128
    UP = I // 16                            # row groups from a gate row to its up row
    if lo < hi:
        t_lo = lo // KS
        rg = _tile_row_group(block_expert_ptr, t_lo, 2 * I, NT, NUM_WARPS)
        wg, sg = _load_step(w_ptr, s_ptr, rg, (lo - t_lo * KS) * NCH, KCH, NCH, NUM_WARPS)
        wu, su = _load_step(w_ptr, s_ptr, rg + UP, (lo - t_lo * KS) * NCH, KCH, NCH, NUM_WARPS)
        rg_next = _tile_row_group(block_expert_ptr, gl.minimum(t_lo + 1, (hi - 1) // KS), 2 * I, NT, NUM_WARPS)
        # tiles in an outer loop, K steps in an inner one without branches: a branch in the loop
        # makes the compiler copy the prefetched words each step, which waits for them to arrive
        for t in range(t_lo, (hi - 1) // KS + 1):
            pairs, pvalid, tok, tmask = _tile_pairs(sorted_pairs_ptr, t, P, TOPK, BT, NT, NUM_WARPS, MMA)
            rg_t = rg
            rg = rg_next
            rg_next = _tile_row_group(block_expert_ptr, gl.minimum(t + 2, (hi - 1) // KS), 2 * I, NT, NUM_WARPS)
            acc_g = gl.zeros([BN, BT], gl.float32, layout=MMA)
            acc_u = gl.zeros([BN, BT], gl.float32, layout=MMA)
            u_end = gl.minimum(hi, t * KS + KS)
            for u in range(gl.maximum(lo, t * KS), u_end):
                rgn, kch = _next_unit(u, u_end, hi, rg_t, rg, t, KS, NCH)
                wgn, sgn = _load_step(w_ptr, s_ptr, rgn, kch, KCH, NCH, NUM_WARPS)
                wun, sun = _load_step(w_ptr, s_ptr, rgn + UP, kch, KCH, NCH, NUM_WARPS)
                xb = _load_b(x_ptr, tok, tmask, (u - t * KS) * BK, H, BT, NCH, NUM_WARPS, B_LAYOUT)
                acc_g = gl.nvidia.ampere.mma_v2(_decode_a(wg, sg, NCH, NUM_WARPS, WIDE, A_LAYOUT), xb, acc_g)
                acc_u = gl.nvidia.ampere.mma_v2(_decode_a(wu, su, NCH, NUM_WARPS, WIDE, A_LAYOUT), xb, acc_u)
                wg = wgn
                sg = sgn
                wu = wun
                su = sun
            done, g, up = _segment_end(part_ptr, cnt_ptr, acc_g, acc_u, p, lo, u_end - 1, t, W, G, True, KS, BN, BT,
                                       MMA)
            if done:
                n = (t % NT) * BN + gl.arange(0, BN, layout=gl.SliceLayout(1, MMA))
                gl.store(act_ptr + pairs[None, :].to(gl.int64) * I + n[:, None], _silu_mul_bf16(g, up),
                         mask=pvalid[None, :])


@gluon.jit(do_not_specialize=["P", "T"])
def _w2_stream_kernel(act_ptr, w_ptr, s_ptr, y_ptr, part_ptr, sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr,
                      cnt_ptr, col_cnt_ptr, wts_ptr, out_ptr, P, H, I, T, BT: gl.constexpr, NCH: gl.constexpr,
                      WIDE: gl.constexpr, KS: gl.constexpr, NT: gl.constexpr, NUM_WARPS: gl.constexpr,
                      PDL: gl.constexpr, TOPK: gl.constexpr):
    """y = act W2^T over units (tile, K step), tile = (block, 16 NUM_WARPS rows of w2), KS = I /
    (128 NCH), NT = H / (16 NUM_WARPS); then out's column tile by the last finished tile of the
    column. cnt_ptr: a counter per tile, col_cnt_ptr: one per column tile (zeroed by align).
    PDL: the first words are loaded before waiting for w13's act."""
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, 8])
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    B_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=MMA, k_width=2)
    BN: gl.constexpr = 16 * NUM_WARPS
    BK: gl.constexpr = NCH * 128
    p = gl.program_id(0)
    nblocks = gl.load(num_blocks_ptr)
    W = nblocks * (NT * KS)
    G = gl.minimum(gl.num_programs(0), W)   # programs past W units get none, the others >= 1
    lo, hi = _span(p, W, G)
    KCH = I // 128
    if lo < hi:
        t_lo = lo // KS
        rg = _tile_row_group(block_expert_ptr, t_lo, H, NT, NUM_WARPS)
        w, s = _load_step(w_ptr, s_ptr, rg, (lo - t_lo * KS) * NCH, KCH, NCH, NUM_WARPS)
        rg_next = _tile_row_group(block_expert_ptr, gl.minimum(t_lo + 1, (hi - 1) // KS), H, NT, NUM_WARPS)
        if PDL:
            _pdl_wait_and_release()         # act is w13's output
        for t in range(t_lo, (hi - 1) // KS + 1):     # as in _w13_stream_kernel
            pairs, pvalid, prow, pmask = _tile_pairs(sorted_pairs_ptr, t, P, 1, BT, NT, NUM_WARPS, MMA)
            rg_t = rg
            rg = rg_next
            rg_next = _tile_row_group(block_expert_ptr, gl.minimum(t + 2, (hi - 1) // KS), H, NT, NUM_WARPS)
            acc = gl.zeros([BN, BT], gl.float32, layout=MMA)
            u_end = gl.minimum(hi, t * KS + KS)
            for u in range(gl.maximum(lo, t * KS), u_end):
                rgn, kch = _next_unit(u, u_end, hi, rg_t, rg, t, KS, NCH)
                wn, sn = _load_step(w_ptr, s_ptr, rgn, kch, KCH, NCH, NUM_WARPS)
                ab = _load_b(act_ptr, prow, pmask, (u - t * KS) * BK, I, BT, NCH, NUM_WARPS, B_LAYOUT)
                acc = gl.nvidia.ampere.mma_v2(_decode_a(w, s, NCH, NUM_WARPS, WIDE, A_LAYOUT), ab, acc)
                w = wn
                s = sn
            done, yt, unused = _segment_end(part_ptr, cnt_ptr, acc, acc, p, lo, u_end - 1, t, W, G, False, KS, BN,
                                            BT, MMA)
            if done:
                nb = t % NT
                n = nb * BN + gl.arange(0, BN, layout=gl.SliceLayout(1, MMA))
                gl.store(y_ptr + pairs[None, :].to(gl.int64) * H + n[:, None], yt, mask=pvalid[None, :])
                _column_sum(y_ptr, wts_ptr, out_ptr, col_cnt_ptr + nb, nblocks, nb, H, T, BN, TOPK, MMA)


@gluon.jit
def _column_sum(y_ptr, wts_ptr, out_ptr, cnt_ptr, nblocks, nb, H, T, BN: gl.constexpr, TOPK: gl.constexpr,
                MMA: gl.constexpr):
    """Column tile nb's tile of block b is in y: the last of the column's nblocks tiles writes
    out[:, tile] (`gluon_kernels._w2_tile`'s FUSE order: pairs j in order, one partial)."""
    if _last_program(cnt_ptr, nblocks):
        cols = nb * BN + gl.arange(0, BN, layout=gl.SliceLayout(1, MMA))
        for t in range(0, T):
            tt = t.to(gl.int64)
            o = gl.zeros([BN], gl.float32, layout=gl.SliceLayout(1, MMA))
            for j in gl.static_range(TOPK):
                wj = gl.load(wts_ptr + tt * TOPK + j)
                o += wj * gl.load(y_ptr + (tt * TOPK + j) * H + cols, cache_modifier=".cg")
            gl.store(out_ptr + tt * H + cols, o.to(gl.bfloat16))
