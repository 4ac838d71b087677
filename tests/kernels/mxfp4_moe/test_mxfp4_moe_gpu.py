"""The MXFP4 MoE kernel at the real shapes of each variant, on a CUDA GPU (skipped without one).

The reference is `moe_torch` in float32, whose decoder is checked bit for bit against
cookbook.mxfp4 in test_mxfp4_moe.py; one real-shape expert is also decoded by the kernel's
decoder and compared with cookbook.mxfp4 bit for bit.
"""

from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[dev]')")
pytest.importorskip("triton", reason="triton is not installed (pip install -e '.[dev]')")
if not torch.cuda.is_available():
    pytest.skip(
        "real-shape tests need a CUDA GPU (run on the H200; CPU CI covers small shapes)", allow_module_level=True
    )

from mxfp4_moe_helpers import all_codes_all_scales, frag_codes_all_scales, same_bits  # noqa: E402

from cookbook import mxfp4  # noqa: E402
from cookbook.kernels.mxfp4_moe import VARIANTS, dequantize_mxfp4, fused_moe_mxfp4, load_table, pick  # noqa: E402
from cookbook.kernels.mxfp4_moe.reference import moe_torch, rel_error  # noqa: E402

TOL = 1e-2


def _routing(shape, tokens, g, all_on=None):
    """x, top-k weights and int32 ids for `tokens` random tokens (all_on: also every token on that expert)."""
    x = torch.randn(tokens, shape.hidden, device="cuda", generator=g).bfloat16()
    vals, ids = torch.rand(tokens, shape.experts, device="cuda", generator=g).topk(shape.top_k, dim=1)
    ids = ids.to(torch.int32)
    if all_on is not None:
        ids[:, 0] = all_on
    return x, torch.softmax(vals, 1), ids


def _assert_matches_reference(out, x, w, wts, ids, label):
    err = rel_error(out.float().cpu().numpy(), moe_torch(x, *w, wts, ids).cpu().numpy())
    assert 0 < err <= TOL, f"{label}: relative error {err:.2e}"


def _assert_same_bits(out, ref):
    same = same_bits(out, ref)
    assert same.all(), f"{(~same).sum()} differ, first {np.argwhere(~same)[0]}"


def _experts(shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    e, h, i = shape.experts, shape.hidden, shape.intermediate
    rnd = lambda *s, lo=0, hi=256: torch.randint(lo, hi, s, dtype=torch.uint8, device="cuda", generator=g)  # noqa: E731
    return (
        rnd(e, 2 * i, h // 2),
        rnd(e, 2 * i, h // 32, lo=118, hi=125),
        rnd(e, h, i // 2),
        rnd(e, h, i // 32, lo=118, hi=125),
    )


def _triton_entry(name, tokens, **change):
    """The shipped entry as the Triton kernels run it (the tables may name kernel gluon, which reads
    the frag layout only): the converter-layout and decoder tests go through these kernels. Their
    wgmma takes a warpgroup's 64 rows at least, so Gluon's 32-row tiles become 64."""
    cfg = replace(
        pick(load_table(name), tokens),
        kernel="triton",
        block_t=16,
        pdl=False,
        fuse=False,
        taper=False,
        direct=False,
        streams=1,
    )
    if cfg.block_n1 < 64:
        cfg = replace(cfg, block_n1=64, warps1=4)
    if cfg.block_n2 < 64:
        cfg = replace(cfg, block_n2=64, warps2=4)
    return replace(cfg, **change)


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request):
    shape = VARIANTS[request.param]
    w = _experts(shape, seed=7)
    yield request.param, shape, w
    del w
    torch.cuda.empty_cache()


def test_real_shape_expert_decodes_bit_for_bit(variant):
    _, shape, (w13p, w13s, w2p, w2s) = variant
    for packed, scales in ((w13p[3], w13s[3]), (w2p[5], w2s[5])):
        out = dequantize_mxfp4(packed, scales).cpu().numpy()
        ref = mxfp4.dequantize(packed.cpu().numpy(), scales.cpu().numpy(), np.float32)
        assert (out.view(np.uint32) == ref.view(np.uint32)).all()


@pytest.mark.parametrize("tokens", [1, 8, 64])
def test_real_shape_moe_matches_float32_reference(variant, tokens):
    name, shape, w = variant
    # 64 tokens: every token also on expert 5 (64 pairs, several blocks)
    x, wts, ids = _routing(
        shape, tokens, torch.Generator(device="cuda").manual_seed(tokens), all_on=5 if tokens == 64 else None
    )
    out = fused_moe_mxfp4(x, *w, wts, ids, config=_triton_entry(name, tokens))
    _assert_matches_reference(out, x, w, wts, ids, f"{name} T={tokens}")


@pytest.mark.parametrize("wide", [True, False])
def test_asm_decoder_bit_for_bit_all_codes_all_scales(wide):
    """The GPU-only inline-PTX decoder (BF16 arithmetic) against cookbook.mxfp4, every code x scale."""
    rng = np.random.default_rng(5)
    packed, scales = all_codes_all_scales(rng, list(range(256)) if wide else list(range(129)) + [255])
    out = (
        dequantize_mxfp4(torch.from_numpy(packed).cuda(), torch.from_numpy(scales).cuda(), wide=wide, decoder="asm")
        .cpu()
        .numpy()
    )
    _assert_same_bits(out, mxfp4.dequantize(packed, scales, np.float32))


@pytest.mark.parametrize("decoder", ["fp32", "asm"])
def test_real_shape_moe_each_decoder(variant, decoder):
    name, shape, w = variant
    x, wts, ids = _routing(shape, 4, torch.Generator(device="cuda").manual_seed(99))
    out = fused_moe_mxfp4(x, *w, wts, ids, config=_triton_entry(name, 4, decoder=decoder))
    _assert_matches_reference(out, x, w, wts, ids, f"{name} decoder {decoder}")


@pytest.mark.parametrize("change", [dict(split1=4, split2=4), dict(split1=8, split2=2), dict(split1=1, split2=1)])
def test_real_shape_split_k(variant, change):
    """Split-K at real shapes, the tuned block sizes otherwise."""
    name, shape, w = variant
    x, wts, ids = _routing(shape, 3, torch.Generator(device="cuda").manual_seed(77))
    out = fused_moe_mxfp4(x, *w, wts, ids, config=_triton_entry(name, 1, decoder="asm", **change))
    _assert_matches_reference(out, x, w, wts, ids, f"{name} {change}")


@pytest.mark.parametrize("wide", [True, False])
def test_frag_asm_decoder_bit_for_bit_all_codes_all_scales(wide):
    """The frag layout's inline-PTX decoder against cookbook.mxfp4, every code x every scale byte."""
    from cookbook.kernels.mxfp4_moe import frag_layout

    rng = np.random.default_rng(6)
    scale_bytes = list(range(256)) if wide else list(range(129)) + [255] * 15  # rows: a multiple of 16
    packed, scales = frag_codes_all_scales(rng, scale_bytes)
    fp, fs = frag_layout.prepare(torch.from_numpy(packed).cuda(), torch.from_numpy(scales).cuda())
    out = dequantize_mxfp4(fp, fs, wide=wide, decoder="asm", layout="frag").cpu().numpy()
    _assert_same_bits(out, mxfp4.dequantize(packed, scales, np.float32))


@pytest.mark.parametrize("decoder", ["fp32", "asm"])
def test_frag_layout_each_decoder_bit_for_bit_and_moe(variant, decoder):
    """The frag layout (one-time re-arrangement) at real shapes: one expert decodes bit for bit
    like cookbook.mxfp4 on the converter's bytes; the MoE matches the reference at 1, 5 and 64
    tokens (64: all on one expert too), with the shipped split-K and without."""

    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    name, shape, w = variant
    f = prepare_experts(*w)
    for packed, scales, fpk, fsc in ((w[0][3], w[1][3], f[0][3], f[1][3]), (w[2][5], w[3][5], f[2][5], f[3][5])):
        out = dequantize_mxfp4(fpk, fsc, decoder=decoder, layout="frag").cpu().numpy()
        ref = mxfp4.dequantize(packed.cpu().numpy(), scales.cpu().numpy(), np.float32)
        assert (out.view(np.uint32) == ref.view(np.uint32)).all()
    g = torch.Generator(device="cuda").manual_seed(55)
    for tokens, split in ((1, None), (5, 1), (64, None)):
        x, wts, ids = _routing(shape, tokens, g, all_on=5 if tokens == 64 else None)
        cfg = _triton_entry(name, tokens, decoder=decoder)
        if split:
            cfg = replace(cfg, split1=split, split2=split)
        got = fused_moe_mxfp4(x, *f, wts, ids, config=cfg, layout="frag")
        _assert_matches_reference(got, x, w, wts, ids, f"{name} frag {decoder} T={tokens}")


@pytest.mark.parametrize(
    "change",
    [
        dict(fuse=True),
        dict(pdl=True, fuse=True),
        dict(prefetch=2, pdl=True, fuse=True),
        dict(prefetch=1, split1=3, split2=2, fuse=True),
    ],
)
def test_fused_epilogues_and_pdl_change_no_bit(variant, change):
    """Launch-level options of the Triton kernels (last-program epilogues, programmatic dependent
    launch, L2 prefetch distance) give the same bits as the plain launches, under a CUDA graph too."""
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    name, shape, w = variant
    f = prepare_experts(*w)
    g = torch.Generator(device="cuda").manual_seed(91)
    for tokens in (1, 8, 64):
        x, wts, ids = _routing(shape, tokens, g, all_on=3 if tokens == 64 else None)
        cfg = _triton_entry(name, tokens, decoder="asm")
        if "split1" in change:
            cfg = replace(cfg, split1=change["split1"], split2=change["split2"])
        plain = fused_moe_mxfp4(x, *f, wts, ids, config=cfg, layout="frag", check_ids=False, scale_max=127)
        new = replace(cfg, **change)
        got = fused_moe_mxfp4(x, *f, wts, ids, config=new, layout="frag", check_ids=False, scale_max=127)
        assert torch.equal(plain.view(torch.int16), got.view(torch.int16)), f"{name} T={tokens} {change}"
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = fused_moe_mxfp4(x, *f, wts, ids, config=new, layout="frag", check_ids=False, scale_max=127)
        for _ in range(3):
            captured.zero_()
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(plain.view(torch.int16), captured.view(torch.int16)), f"{name} T={tokens} graph"


@pytest.mark.parametrize("wide", [True, False])
def test_gluon_decoder_bit_for_bit_all_codes_all_scales(wide):
    """The Gluon kernels' decoder (mma A-operand registers, read back) against cookbook.mxfp4."""
    from cookbook.kernels.mxfp4_moe import frag_layout

    rng = np.random.default_rng(9)
    scale_bytes = list(range(256)) if wide else list(range(129)) + [255] * 15
    packed, scales = frag_codes_all_scales(rng, scale_bytes)
    fp, fs = frag_layout.prepare(torch.from_numpy(packed).cuda(), torch.from_numpy(scales).cuda())
    out = dequantize_mxfp4(fp, fs, wide=wide, decoder="gluon", layout="frag").cpu().numpy()
    _assert_same_bits(out, mxfp4.dequantize(packed, scales, np.float32))


GLUON_CASES = [
    (16, 1, {}),
    (8, 1, {}),
    (16, 4, {}),
    (8, 3, {"prefetch": 2}),
    (8, 4, {"prefetch": 2, "pdl": True}),
    (8, 3, {"fuse": True, "pdl": True}),
]


@pytest.mark.parametrize("block_t,split,extra", GLUON_CASES)
def test_gluon_kernels_match_the_reference_and_the_triton_kernels(variant, block_t, split, extra):
    """kernel="gluon" (mma.sync, no shared memory) at real shapes: one expert decodes bit for bit,
    the MoE matches the float32 reference and the Triton frag kernels (1, 8 and 64 tokens, 64 all
    on one expert), with split-K on both products or without; register depth 2, programmatic
    dependent launch and the fused epilogues give the same bits as depth 1 and plain launches."""
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    name, shape, w = variant
    f = prepare_experts(*w)
    got = dequantize_mxfp4(f[2][5], f[3][5], decoder="gluon", layout="frag").cpu().numpy()
    _assert_same_bits(got, mxfp4.dequantize(w[2][5].cpu().numpy(), w[3][5].cpu().numpy(), np.float32))
    g = torch.Generator(device="cuda").manual_seed(33)
    for tokens in (1, 8, 64):
        x, wts, ids = _routing(shape, tokens, g, all_on=4 if tokens == 64 else None)
        base = _triton_entry(name, tokens, decoder="asm")
        plain = replace(
            base,
            kernel="gluon",
            block_t=block_t,
            block_n1=64,
            warps1=4,
            block_n2=64,
            warps2=4,
            block_k1=128,
            block_k2=128,
            split1=split,
            split2=min(split, 2),
            prefetch=1,
        )
        out = fused_moe_mxfp4(x, *f, wts, ids, config=plain, layout="frag")
        _assert_matches_reference(out, x, w, wts, ids, f"{name} gluon T={tokens}")
        tri = fused_moe_mxfp4(x, *f, wts, ids, config=base, layout="frag").float()
        diff = (out.float() - tri).norm() / tri.norm()
        assert diff <= 2e-3, f"{name} T={tokens}: gluon vs triton {diff:.1e}"
        if extra:
            cfg = replace(plain, **extra)
            again = fused_moe_mxfp4(x, *f, wts, ids, config=cfg, layout="frag", check_ids=False, scale_max=127)
            assert torch.equal(out.view(torch.int16), again.view(torch.int16)), f"{name} T={tokens} {extra}"


@pytest.mark.parametrize("tokens", [1, 2, 8, 64])
def test_shipped_tables_run_as_served(variant, tokens):
    """The tuned entries as `fused_moe_mxfp4` runs them (frag layout, graph-safe call), against the
    float32 reference; 64 tokens also all on one expert."""
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    name, shape, w = variant
    f = prepare_experts(*w)
    x, wts, ids = _routing(
        shape, tokens, torch.Generator(device="cuda").manual_seed(300 + tokens), all_on=2 if tokens == 64 else None
    )
    out = fused_moe_mxfp4(
        x, *f, wts, ids, config=pick(load_table(name), tokens), layout="frag", check_ids=False, scale_max=127
    )
    _assert_matches_reference(out, x, w, wts, ids, f"{name} shipped T={tokens}")


@pytest.mark.parametrize("split", [3, 6])
def test_gluon_tapered_split_matches_the_reference_and_even_splits(variant, split):
    """taper (earlier splits longer, each >= 1 K step): the float32 reference and the even split
    within 2e-3 (another K partition: the partial sums round differently), fused or not."""
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    name, shape, w = variant
    f = prepare_experts(*w)
    g = torch.Generator(device="cuda").manual_seed(66)
    even = replace(pick(load_table(name), 1), split1=split, split2=split, taper=False)
    for tokens in (1, 8, 64):
        x, wts, ids = _routing(shape, tokens, g, all_on=4 if tokens == 64 else None)
        ref = fused_moe_mxfp4(x, *f, wts, ids, config=even, layout="frag", check_ids=False, scale_max=127).float()
        for fuse in (False, True):
            out = fused_moe_mxfp4(
                x,
                *f,
                wts,
                ids,
                config=replace(even, taper=True, fuse=fuse),
                layout="frag",
                check_ids=False,
                scale_max=127,
            )
            _assert_matches_reference(out, x, w, wts, ids, f"{name} taper split={split} T={tokens}")
            diff = (out.float() - ref).norm() / ref.norm()
            assert diff <= 2e-3, f"{name} T={tokens}: tapered vs even split {diff:.1e}"


@pytest.mark.parametrize("fuse", [False, True])
def test_gluon_direct_gives_the_bits_of_align(variant, fuse):
    """direct (no align launch, block b = pair b, its expert read from topk_ids): the same bits as
    the aligned launch at 1, 2 and 5 tokens, with an expert named twice in one token's top-k and an
    expert two tokens share (read once per pair), replayed from a CUDA graph."""
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    name, shape, w = variant
    f = prepare_experts(*w)
    g = torch.Generator(device="cuda").manual_seed(77)
    base = replace(pick(load_table(name), 1), fuse=fuse)
    for tokens, twice in ((1, False), (1, True), (2, False), (2, True), (5, True)):
        x, wts, ids = _routing(shape, tokens, g)
        if twice:
            ids[0, 1] = ids[0, 0]
            ids[-1, 2] = ids[0, 0]  # shared with token 0 (the same token when tokens == 1)
        call = dict(layout="frag", check_ids=False, scale_max=127)
        plain = fused_moe_mxfp4(x, *f, wts, ids, config=replace(base, direct=False), **call)
        _assert_matches_reference(plain, x, w, wts, ids, f"{name} T={tokens}")
        direct = fused_moe_mxfp4(x, *f, wts, ids, config=replace(base, direct=True), **call)
        assert torch.equal(plain.view(torch.int16), direct.view(torch.int16)), f"{name} T={tokens} twice={twice}"
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = fused_moe_mxfp4(x, *f, wts, ids, config=replace(base, direct=True), **call)
        for _ in range(2):
            captured.zero_()
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(plain.view(torch.int16), captured.view(torch.int16)), f"{name} T={tokens} graph"


def test_gluon_streams_give_the_bits_of_one(variant):
    """streams 2-4 (direct and fused: the pairs in parts, each its w13 and w2 on a stream of its own): the
    same bits as one stream at 1, 2 and 5 tokens, an expert named twice and one two tokens share, with and
    without a workspace, eagerly and replayed from a CUDA graph (which records the fork and the join)."""
    from cookbook.kernels.mxfp4_moe import moe, moe_workspace
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    name, shape, w = variant
    f = prepare_experts(*w)
    g = torch.Generator(device="cuda").manual_seed(79)
    base = replace(pick(load_table(name), 1), direct=True, fuse=True, streams=1)
    ws = moe_workspace("cuda")
    torch.cuda.synchronize()
    moe._SIDE_STREAMS.clear()  # so the check below sees this test's calls only
    for tokens, twice in ((1, False), (1, True), (2, True), (5, True)):
        x, wts, ids = _routing(shape, tokens, g)
        if twice:
            ids[0, 1] = ids[0, 0]
            ids[-1, 2] = ids[0, 0]
        call = dict(layout="frag", check_ids=False, scale_max=127)
        one = fused_moe_mxfp4(x, *f, wts, ids, config=base, **call)
        _assert_matches_reference(one, x, w, wts, ids, f"{name} T={tokens}")
        for streams, workspace in ((2, None), (2, ws), (3, ws), (4, None)):
            two = fused_moe_mxfp4(x, *f, wts, ids, config=replace(base, streams=streams), workspace=workspace, **call)
            assert torch.equal(one.view(torch.int16), two.view(torch.int16)), f"{name} T={tokens} {streams} streams"
        # the parts did go to side streams (equal bits alone would also hold if the call ignored streams)
        assert len(moe._SIDE_STREAMS.get(str(x.device), [])) >= 3, "streams 4 made no side streams"
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = fused_moe_mxfp4(x, *f, wts, ids, config=replace(base, streams=2), workspace=ws, **call)
        for _ in range(2):
            captured.zero_()
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(one.view(torch.int16), captured.view(torch.int16)), f"{name} T={tokens} graph"
        assert int(ws.abs().sum()) == 0, "counters left non-zero"


@pytest.mark.parametrize("tokens", [1, 2])
def test_gluon_timeline_records_every_program_and_changes_no_bit(variant, tokens):
    """trace (timeline.py): every program's start <= end of its K loop <= end, on a real SM; programs
    without a tile (align's unused blocks) record no loop; w2's loops end after every w13 program
    (it reads their output, with or without programmatic dependent launch); the output keeps its bits."""
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    name, shape, w = variant
    f = prepare_experts(*w)
    g = torch.Generator(device="cuda").manual_seed(78)
    x, wts, ids = _routing(shape, tokens, g)
    cfg = pick(load_table(name), tokens)
    call = dict(config=cfg, layout="frag", check_ids=False, scale_max=127)
    plain = fused_moe_mxfp4(x, *f, wts, ids, **call)
    trace = {}
    traced = fused_moe_mxfp4(x, *f, wts, ids, trace=trace, **call)
    torch.cuda.synchronize()
    assert torch.equal(plain.view(torch.int16), traced.view(torch.int16))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    pairs = tokens * shape.top_k
    counts = torch.bincount(ids.reshape(-1).long(), minlength=shape.experts)
    blocks = pairs if cfg.direct else int(((counts + cfg.block_t - 1) // cfg.block_t).sum())  # direct: one per pair
    for kernel, rows, _k_total, block_n, split in (
        ("w13", shape.intermediate, shape.hidden, cfg.block_n1, cfg.split1),
        ("w2", shape.hidden, shape.intermediate, cfg.block_n2, cfg.split2),
    ):
        tr = trace[kernel].cpu()
        start, loop_end, end, sm = tr.unbind(1)
        assert (start > 0).all() and (end >= start).all() and (sm >= 0).all() and (sm < sms).all(), kernel
        looped = loop_end > 0
        assert int(looped.sum()) == blocks * (rows // block_n) * split, kernel
        assert (start[looped] <= loop_end[looped]).all() and (loop_end[looped] <= end[looped]).all(), kernel
    w13_end = int(trace["w13"][:, 2].max())
    w2_loop = trace["w2"][:, 1]
    assert int(w2_loop[w2_loop > 0].min()) > w13_end


def test_gluon_workspace_is_left_zeroed_and_skips_the_fill(variant):
    """workspace= (one token): the kernels reset every counter they count on, so one workspace
    serves call after call, eager and replayed from a CUDA graph, with the bits of a call that
    fills fresh counters; a workspace too small or of the wrong type is refused with a message."""
    from cookbook.kernels.mxfp4_moe import moe_workspace
    from cookbook.kernels.mxfp4_moe.moe import MoEInputError
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    name, shape, w = variant
    f = prepare_experts(*w)
    g = torch.Generator(device="cuda").manual_seed(78)
    cfg = pick(load_table(name), 1)
    assert cfg.direct and cfg.fuse, f"{name}: the 1-token entry no longer takes the direct, fused path"
    call = dict(config=cfg, layout="frag", check_ids=False, scale_max=127)
    ws = moe_workspace("cuda")
    for _ in range(3):
        x, wts, ids = _routing(shape, 1, g)
        fresh = fused_moe_mxfp4(x, *f, wts, ids, **call)
        _assert_matches_reference(fresh, x, w, wts, ids, f"{name} fresh counters")
        kept = fused_moe_mxfp4(x, *f, wts, ids, workspace=ws, **call)
        torch.cuda.synchronize()
        assert torch.equal(fresh.view(torch.int16), kept.view(torch.int16)), name
        assert int(ws.count_nonzero()) == 0, f"{name}: the kernels left {int(ws.count_nonzero())} counters set"
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = fused_moe_mxfp4(x, *f, wts, ids, workspace=ws, **call)
    for _ in range(3):
        captured.zero_()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(fresh.view(torch.int16), captured.view(torch.int16)), f"{name} graph"
    assert int(ws.count_nonzero()) == 0
    with pytest.raises(MoEInputError, match="moe_workspace"):
        fused_moe_mxfp4(x, *f, wts, ids, workspace=moe_workspace("cuda", size=1), **call)
    with pytest.raises(MoEInputError, match="int32"):
        fused_moe_mxfp4(x, *f, wts, ids, workspace=torch.zeros(8192, device="cuda"), **call)
