"""Gluon expert kernels whose weight words arrive through cp.async into a per-thread shared ring.

The register kernels (`gluon_kernels.py`) load the next K step's words into registers, but ptxas
issues those loads after this step's decode, which waits for this step's words: each warp has
one K step in flight and waits a full memory latency per step (SASS of the loop, 2026-11-29).
Here each thread copies its own words and scale bytes STAGES - 1 steps ahead with cp.async
(LDGSTS: the copy does not hold registers, so nothing makes the compiler wait for it) and reads
them back from shared memory after `wait_group`. A thread reads only what it copied itself.
NCH 1 only (block_k 128): a lane's scales are 2 bytes, below cp.async's 4, so each lane copies
the 4 bytes holding its pair's and keeps its half.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy

from .gluon_kernels import _b_rows, _block, _decode_a, _k_steps, _load_b, _silu_mul_bf16


@gluon.jit
def _copy_step(smem_w, smem_s, slot, w_ptr, s_ptr, rg0, kch, KCH_TOTAL, NUM_WARPS: gl.constexpr):
    """Start copying one K step (one chunk) of row groups rg0 .. rg0 + NUM_WARPS into ring slot `slot`:
    each lane its 32 word bytes and the 4 scale bytes holding its own 2."""
    LW: gl.constexpr = gl.BlockedLayout([1, 4], [32, 1], [NUM_WARPS, 1], [1, 0])
    r = gl.arange(0, 32 * NUM_WARPS, layout=gl.SliceLayout(1, LW))
    b = gl.arange(0, 8, layout=gl.SliceLayout(0, LW))
    chunk = ((rg0 + r // 32) * KCH_TOTAL + kch).to(gl.int64)
    async_copy.async_copy_global_to_shared(smem_w.index(slot),
                                           w_ptr + (chunk * 256 + (r % 32) * 8)[:, None] + b[None, :])
    r4 = gl.arange(0, 32 * NUM_WARPS, layout=gl.SliceLayout(1, LW))
    b4 = gl.arange(0, 4, layout=gl.SliceLayout(0, LW))
    async_copy.async_copy_global_to_shared(smem_s.index(slot),
                                           s_ptr + (chunk * 64 + ((r4 % 32) // 2) * 4)[:, None] + b4[None, :])


@gluon.jit
def _read_step(smem_w, smem_s, slot, NUM_WARPS: gl.constexpr):
    """The words and scales (as `gluon_kernels._load_step` returns them) in ring slot `slot`."""
    LW: gl.constexpr = gl.BlockedLayout([1, 4], [32, 1], [NUM_WARPS, 1], [1, 0])
    LS: gl.constexpr = gl.BlockedLayout([1, 2], [32, 1], [NUM_WARPS, 1], [1, 0])
    words = smem_w.index(slot).load(LW)
    s4 = smem_s.index(slot).load(LW)                               # [32 W, 4]: lane pair's 2 + 2 bytes
    lo, hi = gl.split(gl.permute(gl.reshape(s4, [32 * NUM_WARPS, 2, 2]), (0, 2, 1)))
    r = gl.arange(0, 32 * NUM_WARPS, layout=gl.SliceLayout(1, lo.type.layout))
    return words, gl.convert_layout(gl.where((r % 2 == 1)[:, None], hi, lo), LS)


@gluon.jit
def _ring(NUM_WARPS: gl.constexpr, SLOTS: gl.constexpr):
    SH: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    return (gl.allocate_shared_memory(gl.int32, [SLOTS, 32 * NUM_WARPS, 8], SH),
            gl.allocate_shared_memory(gl.uint8, [SLOTS, 32 * NUM_WARPS, 4], SH))


@gluon.jit(do_not_specialize=["P", "TOPK"])
def _w13_async_kernel(x_ptr, w_ptr, s_ptr, act_ptr, part_ptr, sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr,
                      P, H, I, TOPK, BT: gl.constexpr, WIDE: gl.constexpr, SPLIT: gl.constexpr,
                      NUM_WARPS: gl.constexpr, STAGES: gl.constexpr):
    """`gluon_kernels._w13_gluon_kernel` (FUSE and PDL off) with the words through the ring: slot
    2 i + 0 gate, 2 i + 1 up of stage i."""
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, 8])
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    B_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=MMA, k_width=2)
    BN: gl.constexpr = 16 * NUM_WARPS
    b = gl.program_id(0)
    active, e, pairs, pvalid = _block(sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr, b, P, BT,
                                      gl.SliceLayout(0, MMA))
    if active:
        smem_w, smem_s = _ring(NUM_WARPS, 2 * STAGES)
        tok = _b_rows(pairs // TOPK, NUM_WARPS)
        tmask = _b_rows(pvalid, NUM_WARPS)
        n0 = gl.program_id(1) * BN
        rg_g = (e * (2 * I) + n0) // 16
        rg_u = rg_g + I // 16
        KCH = H // 128
        k_lo, k_hi = _k_steps(H, gl.program_id(2), 128, SPLIT)
        for i in gl.static_range(STAGES - 1):           # the last steps copy the last one again
            kc = gl.minimum(k_lo + i * 128, k_hi - 128) // 128
            _copy_step(smem_w, smem_s, 2 * i, w_ptr, s_ptr, rg_g, kc, KCH, NUM_WARPS)
            _copy_step(smem_w, smem_s, 2 * i + 1, w_ptr, s_ptr, rg_u, kc, KCH, NUM_WARPS)
            async_copy.commit_group()
        acc_g = gl.zeros([BN, BT], gl.float32, layout=MMA)
        acc_u = gl.zeros([BN, BT], gl.float32, layout=MMA)
        for k0 in range(k_lo, k_hi, 128):
            j = (k0 - k_lo) // 128
            nxt = (j + STAGES - 1) % STAGES
            kc = gl.minimum(k0 + (STAGES - 1) * 128, k_hi - 128) // 128
            _copy_step(smem_w, smem_s, 2 * nxt, w_ptr, s_ptr, rg_g, kc, KCH, NUM_WARPS)
            _copy_step(smem_w, smem_s, 2 * nxt + 1, w_ptr, s_ptr, rg_u, kc, KCH, NUM_WARPS)
            async_copy.commit_group()
            xb = _load_b(x_ptr, tok, tmask, k0, H, BT, 1, NUM_WARPS, B_LAYOUT)
            async_copy.wait_group(STAGES - 1)
            cur = j % STAGES
            wg, sg = _read_step(smem_w, smem_s, 2 * cur, NUM_WARPS)
            wu, su = _read_step(smem_w, smem_s, 2 * cur + 1, NUM_WARPS)
            acc_g = gl.nvidia.ampere.mma_v2(_decode_a(wg, sg, 1, NUM_WARPS, WIDE, A_LAYOUT), xb, acc_g)
            acc_u = gl.nvidia.ampere.mma_v2(_decode_a(wu, su, 1, NUM_WARPS, WIDE, A_LAYOUT), xb, acc_u)
        async_copy.wait_group(0)
        n = n0 + gl.arange(0, BN, layout=gl.SliceLayout(1, MMA))
        mask = pvalid[None, :]
        if SPLIT == 1:
            gl.store(act_ptr + pairs[None, :].to(gl.int64) * I + n[:, None], _silu_mul_bf16(acc_g, acc_u), mask=mask)
        else:
            row = pairs[None, :].to(gl.int64) * (2 * I) + n[:, None]
            stride = P * (2 * I)
            gl.store(part_ptr + gl.program_id(2) * stride + row, acc_g, mask=mask)
            gl.store(part_ptr + gl.program_id(2) * stride + row + I, acc_u, mask=mask)


@gluon.jit(do_not_specialize=["P"])
def _w2_async_kernel(act_ptr, w_ptr, s_ptr, y_ptr, sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr,
                     P, H, I, BT: gl.constexpr, WIDE: gl.constexpr, SPLIT: gl.constexpr,
                     NUM_WARPS: gl.constexpr, STAGES: gl.constexpr):
    """`gluon_kernels._w2_gluon_kernel` (FUSE and PDL off) with the words through the ring."""
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, 8])
    A_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
    B_LAYOUT: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=MMA, k_width=2)
    BN: gl.constexpr = 16 * NUM_WARPS
    active, e, pairs, pvalid = _block(sorted_pairs_ptr, block_expert_ptr, num_blocks_ptr, gl.program_id(0), P, BT,
                                      gl.SliceLayout(0, MMA))
    if active:
        smem_w, smem_s = _ring(NUM_WARPS, STAGES)
        prow = _b_rows(pairs, NUM_WARPS)
        pmask = _b_rows(pvalid, NUM_WARPS)
        n0 = gl.program_id(1) * BN
        rg = (e * H + n0) // 16
        KCH = I // 128
        sk = gl.program_id(2)
        k_lo, k_hi = _k_steps(I, sk, 128, SPLIT)
        for i in gl.static_range(STAGES - 1):
            _copy_step(smem_w, smem_s, i, w_ptr, s_ptr, rg, gl.minimum(k_lo + i * 128, k_hi - 128) // 128, KCH,
                       NUM_WARPS)
            async_copy.commit_group()
        acc = gl.zeros([BN, BT], gl.float32, layout=MMA)
        for k0 in range(k_lo, k_hi, 128):
            j = (k0 - k_lo) // 128
            _copy_step(smem_w, smem_s, (j + STAGES - 1) % STAGES, w_ptr, s_ptr, rg,
                       gl.minimum(k0 + (STAGES - 1) * 128, k_hi - 128) // 128, KCH, NUM_WARPS)
            async_copy.commit_group()
            ab = _load_b(act_ptr, prow, pmask, k0, I, BT, 1, NUM_WARPS, B_LAYOUT)
            async_copy.wait_group(STAGES - 1)
            w, s = _read_step(smem_w, smem_s, j % STAGES, NUM_WARPS)
            acc = gl.nvidia.ampere.mma_v2(_decode_a(w, s, 1, NUM_WARPS, WIDE, A_LAYOUT), ab, acc)
        async_copy.wait_group(0)
        n = n0 + gl.arange(0, BN, layout=gl.SliceLayout(1, MMA))
        gl.store(y_ptr + (sk * P + pairs[None, :]).to(gl.int64) * H + n[:, None], acc, mask=pvalid[None, :])
