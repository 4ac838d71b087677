"""The MXFP4 MoE kernel at the real shapes of each variant, on a CUDA GPU (skipped without one).

The reference is `moe_torch` in float32, whose decoder is checked bit for bit against
cookbook.mxfp4 in test_mxfp4_moe.py; one real-shape expert is also decoded by the kernel's
decoder and compared with cookbook.mxfp4 bit for bit.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[dev]')")
pytest.importorskip("triton", reason="triton is not installed (pip install -e '.[dev]')")
if not torch.cuda.is_available():
    pytest.skip("real-shape tests need a CUDA GPU (run on the H200; CPU CI covers small shapes)",
                allow_module_level=True)

from cookbook import mxfp4  # noqa: E402
from cookbook.kernels.mxfp4_moe import VARIANTS, dequantize_mxfp4, fused_moe_mxfp4, load_table, pick  # noqa: E402
from cookbook.kernels.mxfp4_moe.reference import moe_torch, rel_error  # noqa: E402

TOL = 1e-2


def _experts(shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    e, h, i = shape.experts, shape.hidden, shape.intermediate
    rnd = lambda *s, lo=0, hi=256: torch.randint(lo, hi, s, dtype=torch.uint8, device="cuda", generator=g)  # noqa: E731
    return rnd(e, 2 * i, h // 2), rnd(e, 2 * i, h // 32, lo=118, hi=125), rnd(e, h, i // 2), rnd(e, h, i // 32, lo=118, hi=125)


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
    g = torch.Generator(device="cuda").manual_seed(tokens)
    x = torch.randn(tokens, shape.hidden, device="cuda", generator=g).bfloat16()
    vals, ids = torch.rand(tokens, shape.experts, device="cuda", generator=g).topk(shape.top_k, dim=1)
    wts = torch.softmax(vals, 1)
    ids = ids.to(torch.int32)
    if tokens == 64:
        ids[:, 0] = 5   # every token also on expert 5: 64 pairs, several blocks
    cfg = pick(load_table(name), tokens)
    out = fused_moe_mxfp4(x, *w, wts, ids, config=cfg)
    ref = moe_torch(x, *w, wts, ids)
    err = rel_error(out.float().cpu().numpy(), ref.cpu().numpy())
    assert 0 < err <= TOL, f"{name} T={tokens}: relative error {err:.2e}"


@pytest.mark.parametrize("wide", [True, False])
def test_asm_decoder_bit_for_bit_all_codes_all_scales(wide):
    """The GPU-only inline-PTX decoder (BF16 arithmetic) against cookbook.mxfp4, every code x scale."""
    rng = np.random.default_rng(5)
    scale_bytes = list(range(256)) if wide else list(range(129)) + [255]
    packed = np.stack([rng.permutation(256)[:32] for _ in scale_bytes]).astype(np.uint8)
    packed[:, :16] = np.arange(16, dtype=np.uint8) * 17
    scales = np.repeat(np.asarray(scale_bytes, dtype=np.uint8)[:, None], 2, axis=1)
    out = dequantize_mxfp4(torch.from_numpy(packed).cuda(), torch.from_numpy(scales).cuda(),
                           wide=wide, decoder="asm").cpu().numpy()
    ref = mxfp4.dequantize(packed, scales, np.float32)
    same = (out.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(out) & np.isnan(ref))
    assert same.all(), f"{(~same).sum()} differ, first {np.argwhere(~same)[0]}"


@pytest.mark.parametrize("decoder", ["fp32", "asm"])
def test_real_shape_moe_each_decoder(variant, decoder):
    from dataclasses import replace
    name, shape, w = variant
    g = torch.Generator(device="cuda").manual_seed(99)
    x = torch.randn(4, shape.hidden, device="cuda", generator=g).bfloat16()
    vals, ids = torch.rand(4, shape.experts, device="cuda", generator=g).topk(shape.top_k, dim=1)
    wts = torch.softmax(vals, 1)
    cfg = replace(pick(load_table(name), 4), decoder=decoder)
    out = fused_moe_mxfp4(x, *w, wts, ids.to(torch.int32), config=cfg)
    ref = moe_torch(x, *w, wts, ids)
    err = rel_error(out.float().cpu().numpy(), ref.cpu().numpy())
    assert 0 < err <= TOL, f"{name} decoder {decoder}: relative error {err:.2e}"


@pytest.mark.parametrize("change", [dict(split1=4, split2=4), dict(split1=8, split2=2), dict(split1=1, split2=1)])
def test_real_shape_split_k(variant, change):
    """Split-K at real shapes, the tuned block sizes otherwise."""
    from dataclasses import replace
    name, shape, w = variant
    g = torch.Generator(device="cuda").manual_seed(77)
    x = torch.randn(3, shape.hidden, device="cuda", generator=g).bfloat16()
    vals, ids = torch.rand(3, shape.experts, device="cuda", generator=g).topk(shape.top_k, dim=1)
    wts = torch.softmax(vals, 1)
    cfg = replace(pick(load_table(name), 1), decoder="asm", **change)
    out = fused_moe_mxfp4(x, *w, wts, ids.to(torch.int32), config=cfg)
    ref = moe_torch(x, *w, wts, ids)
    err = rel_error(out.float().cpu().numpy(), ref.cpu().numpy())
    assert 0 < err <= TOL, f"{name} {change}: relative error {err:.2e}"


@pytest.mark.parametrize("wide", [True, False])
def test_frag_asm_decoder_bit_for_bit_all_codes_all_scales(wide):
    """The frag layout's inline-PTX decoder against cookbook.mxfp4, every code x every scale byte."""
    from cookbook.kernels.mxfp4_moe import frag_layout
    rng = np.random.default_rng(6)
    scale_bytes = list(range(256)) if wide else list(range(129)) + [255] * 15   # rows: a multiple of 16
    packed = rng.integers(0, 256, (len(scale_bytes), 64), dtype=np.uint8)
    packed[:, :16] = np.arange(16, dtype=np.uint8) * 17
    packed[:, 32:48] = np.arange(16, dtype=np.uint8) * 17
    scales = np.repeat(np.asarray(scale_bytes, dtype=np.uint8)[:, None], 4, axis=1)
    fp, fs = frag_layout.prepare(torch.from_numpy(packed).cuda(), torch.from_numpy(scales).cuda())
    out = dequantize_mxfp4(fp, fs, wide=wide, decoder="asm", layout="frag").cpu().numpy()
    ref = mxfp4.dequantize(packed, scales, np.float32)
    same = (out.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(out) & np.isnan(ref))
    assert same.all(), f"{(~same).sum()} differ, first {np.argwhere(~same)[0]}"


@pytest.mark.parametrize("decoder", ["fp32", "asm"])
def test_frag_layout_each_decoder_bit_for_bit_and_moe(variant, decoder):
    """The frag layout (one-time re-arrangement) at real shapes: one expert decodes bit for bit
    like cookbook.mxfp4 on the converter's bytes; the MoE matches the reference at 1, 5 and 64
    tokens (64: all on one expert too), with the shipped split-K and without."""
    from dataclasses import replace

    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts
    name, shape, w = variant
    f = prepare_experts(*w)
    for packed, scales, fpk, fsc in ((w[0][3], w[1][3], f[0][3], f[1][3]), (w[2][5], w[3][5], f[2][5], f[3][5])):
        out = dequantize_mxfp4(fpk, fsc, decoder=decoder, layout="frag").cpu().numpy()
        ref = mxfp4.dequantize(packed.cpu().numpy(), scales.cpu().numpy(), np.float32)
        assert (out.view(np.uint32) == ref.view(np.uint32)).all()
    g = torch.Generator(device="cuda").manual_seed(55)
    for tokens, split in ((1, None), (5, 1), (64, None)):
        x = torch.randn(tokens, shape.hidden, device="cuda", generator=g).bfloat16()
        vals, ids = torch.rand(tokens, shape.experts, device="cuda", generator=g).topk(shape.top_k, dim=1)
        wts = torch.softmax(vals, 1)
        ids = ids.to(torch.int32)
        if tokens == 64:
            ids[:, 0] = 5
        cfg = replace(pick(load_table(name), tokens), decoder=decoder)
        if split:
            cfg = replace(cfg, split1=split, split2=split)
        got = fused_moe_mxfp4(x, *f, wts, ids, config=cfg, layout="frag")
        err = rel_error(got.float().cpu().numpy(), moe_torch(x, *w, wts, ids).cpu().numpy())
        assert 0 < err <= TOL, f"{name} frag {decoder} T={tokens}: relative error {err:.2e}"
