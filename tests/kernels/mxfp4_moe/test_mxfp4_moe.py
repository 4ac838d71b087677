"""Correctness of the fused MXFP4 MoE kernel (kernels/mxfp4-moe).

On a machine without a GPU these run through Triton's CPU interpreter (conftest sets
TRITON_INTERPRET=1) at small shapes; on a GPU they run compiled.

Tolerance: the MoE output is compared with a float32 reference (weights decoded by
cookbook.mxfp4, float64 math) by ||out - ref|| / ||ref|| <= 1e-2. The weights are exact in
the kernel; the error comes from BF16 rounding of the activations x (shared with the
reference), of the SiLU*up intermediate and of the output (each ~2**-9 relative), and
from the GPU's BF16 tensor-core products. Measured here: about 2e-3.
"""

import json
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[dev]')")
pytest.importorskip("triton", reason="triton is not installed (pip install -e '.[dev]')")

from mxfp4_moe_helpers import all_codes_all_scales, frag_codes_all_scales, same_bits  # noqa: E402

from cookbook import mxfp4  # noqa: E402
from cookbook.kernels.mxfp4_moe import (  # noqa: E402
    VARIANTS,
    ConfigError,
    LaunchConfig,
    dequantize_mxfp4,
    fused_moe_mxfp4,
    load_table,
    pick,
)
from cookbook.kernels.mxfp4_moe.config import _parse_table  # noqa: E402
from cookbook.kernels.mxfp4_moe.moe import MoEInputError, _interpret  # noqa: E402
from cookbook.kernels.mxfp4_moe.reference import dequant_torch, moe_reference, rel_error  # noqa: E402

TOL = 1e-2
DEV = "cuda" if torch.cuda.is_available() else "cpu"
SMALL = LaunchConfig(block_t=16, block_n1=32, block_k1=64, block_n2=32, block_k2=64)


@pytest.mark.parametrize("wide", [True, False])
def test_dequant_matches_library_bit_for_bit(wide):
    rng = np.random.default_rng(1)
    # the one-multiply decoder (wide=False) is used only when every scale byte is <= 128
    scale_bytes = list(range(256)) if wide else list(range(129)) + [255]
    packed, scales = all_codes_all_scales(rng, scale_bytes)
    out = dequantize_mxfp4(torch.from_numpy(packed).to(DEV), torch.from_numpy(scales).to(DEV), wide=wide)
    ref = mxfp4.dequantize(packed, scales, np.float32)
    same = same_bits(out.cpu().numpy(), ref)
    assert same.all(), f"{(~same).sum()} values differ, first at {np.argwhere(~same)[0]}"
    assert np.isnan(ref[scale_bytes.index(255)]).all()  # the NaN scale byte really was covered


def test_dequant_bf16_is_the_library_value_rounded():
    rng = np.random.default_rng(2)
    packed, scales = all_codes_all_scales(rng, list(range(255)))
    out = dequantize_mxfp4(torch.from_numpy(packed).to(DEV), torch.from_numpy(scales).to(DEV), out_dtype=torch.bfloat16)
    ref_bits = mxfp4.float32_to_bf16_bits(mxfp4.dequantize(packed, scales, np.float32))
    got_bits = out.cpu().view(torch.int16).numpy().view(np.uint16)
    assert (got_bits == ref_bits).all()


def test_torch_twin_of_the_library_is_exact():
    rng = np.random.default_rng(3)
    packed, scales = all_codes_all_scales(rng, list(range(256)))
    out = dequant_torch(torch.from_numpy(packed), torch.from_numpy(scales)).numpy()
    assert same_bits(out, mxfp4.dequantize(packed, scales, np.float32)).all()


def _experts(rng, e, h, i, scale=0.05):
    w13p, w13s = mxfp4.quantize(rng.standard_normal((e, 2 * i, h)).astype(np.float32) * scale)
    w2p, w2s = mxfp4.quantize(rng.standard_normal((e, h, i)).astype(np.float32) * scale)
    return w13p, w13s, w2p, w2s


def _routing(rng, t, e, k):
    ids = np.stack([rng.choice(e, k, replace=False) for _ in range(t)]).astype(np.int32)
    wts = rng.random((t, k)).astype(np.float32)
    return ids, wts / wts.sum(1, keepdims=True)


def _run(x, experts, wts, ids, config=SMALL):
    tens = [torch.from_numpy(np.ascontiguousarray(a)).to(DEV) for a in experts]
    out = fused_moe_mxfp4(x.to(DEV), *tens, torch.from_numpy(wts).to(DEV), torch.from_numpy(ids).to(DEV), config=config)
    assert out.dtype == torch.bfloat16 and out.shape == x.shape
    return out.float().cpu().numpy()


def _check(x, experts, wts, ids, config=SMALL):
    out = _run(x, experts, wts, ids, config)
    ref = moe_reference(x.float().numpy(), *experts, wts, ids)
    err = rel_error(out, ref)
    assert err <= TOL, f"relative error {err:.2e} > {TOL}"
    return out, err


@pytest.mark.parametrize("t,k", [(1, 2), (5, 3), (16, 2), (33, 4)])
def test_moe_matches_float32_reference(t, k):
    rng = np.random.default_rng(10 + t)
    e, h, i = 8, 128, 64
    experts = _experts(rng, e, h, i)
    ids, wts = _routing(rng, t, e, k)
    x = torch.randn(t, h, generator=torch.Generator().manual_seed(t)).bfloat16()
    _, err = _check(x, experts, wts, ids)
    assert err > 0  # a real comparison, not identical zeros


def test_expert_with_no_tokens_is_never_read():
    rng = np.random.default_rng(20)
    e, h, i, t, k = 8, 128, 64, 6, 2
    w13p, w13s, w2p, w2s = _experts(rng, e, h, i)
    ids, wts = _routing(rng, t, 4, k)  # experts 4..7 get no tokens
    for s in (w13s, w2s):
        s[4:] = mxfp4.SCALE_NAN  # their weights decode to NaN: reading them would poison the output
    x = torch.randn(t, h, generator=torch.Generator().manual_seed(0)).bfloat16()
    out, _ = _check(x, (w13p, w13s, w2p, w2s), wts, ids)
    assert np.isfinite(out).all()


def test_all_tokens_on_one_expert_spans_several_blocks():
    rng = np.random.default_rng(21)
    e, h, i, t, k = 8, 128, 64, 40, 2  # 40 pairs on expert 3 > BLOCK_T=16: three blocks
    experts = _experts(rng, e, h, i)
    ids = np.stack([[3, rng.choice([0, 1, 2, 4, 5, 6, 7])] for _ in range(t)]).astype(np.int32)
    wts = rng.random((t, k)).astype(np.float32)
    x = torch.randn(t, h, generator=torch.Generator().manual_seed(1)).bfloat16()
    _check(x, experts, wts, ids)
    only = np.full((t, 1), 3, dtype=np.int32)
    _check(x, experts, np.ones((t, 1), np.float32), only)


def test_scales_at_their_limits():
    """Blocks with scale bytes 0, 1 (2**-127, 2**-126: subnormal weights) and 129..135 (>= 2**2,
    the two-multiply decoder) next to ordinary ones; activations scaled so outputs stay finite."""
    rng = np.random.default_rng(22)
    e, h, i, t, k = 4, 128, 64, 5, 2
    w13p, w13s, w2p, w2s = _experts(rng, e, h, i)
    w13s[:, :, 0] = 0
    w13s[:, 1::3, 1] = 1
    w13s[:, ::2, 2] = rng.integers(129, 136, size=w13s[:, ::2, 2].shape)
    w2s[:, ::2, 0] = 130
    w2s[:, 1::2, 1] = 0
    ids, wts = _routing(rng, t, e, k)
    x = (torch.randn(t, h, generator=torch.Generator().manual_seed(2)) * 1e-3).bfloat16()
    out, _ = _check(x, (w13p, w13s, w2p, w2s), wts, ids)
    assert np.isfinite(out).all()


def test_repeatable_bit_for_bit():
    rng = np.random.default_rng(23)
    experts = _experts(rng, 8, 128, 64)
    ids, wts = _routing(rng, 9, 8, 3)
    x = torch.randn(9, 128, generator=torch.Generator().manual_seed(3)).bfloat16()
    a = _run(x, experts, wts, ids)
    b = _run(x, experts, wts, ids)
    assert (a.view(np.uint32) == b.view(np.uint32)).all()


def test_bad_inputs_get_one_clear_message():
    rng = np.random.default_rng(24)
    w13p, w13s, w2p, w2s = (torch.from_numpy(a) for a in _experts(rng, 4, 128, 64))
    x = torch.zeros(2, 128).bfloat16()
    ids = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    wts = torch.ones(2, 2)
    with pytest.raises(MoEInputError, match="w2_packed must be uint8"):
        fused_moe_mxfp4(x, w13p, w13s, w2p[:, :64], w2s, wts, ids)
    with pytest.raises(MoEInputError, match="x must be bf16"):
        fused_moe_mxfp4(x.float(), w13p, w13s, w2p, w2s, wts, ids)
    with pytest.raises(MoEInputError, match=r"topk_ids must lie in \[0, 4\)"):
        fused_moe_mxfp4(x, w13p, w13s, w2p, w2s, wts, ids + 1, config=SMALL)
    with pytest.raises(MoEInputError, match="1..256 tokens"):
        fused_moe_mxfp4(
            torch.zeros(300, 128).bfloat16(),
            w13p,
            w13s,
            w2p,
            w2s,
            torch.ones(300, 2),
            torch.zeros(300, 2, dtype=torch.int32),
        )


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_shipped_config_tables_load_and_fit_the_shapes(variant):
    table = load_table(variant)
    shape = VARIANTS[variant]
    assert 1 in table and max(table) >= 64
    for batch, cfg in table.items():
        assert shape.hidden % cfg.block_k1 == 0 and shape.intermediate % cfg.block_k2 == 0, (variant, batch)
        # tuned for the frag layout: whole 128-K chunks, row tiles inside one expert's rows
        assert cfg.block_k1 % 128 == 0 and cfg.block_k2 % 128 == 0, (variant, batch)
        assert shape.intermediate % cfg.block_n1 == 0 and shape.hidden % cfg.block_n2 == 0, (variant, batch)
    assert pick(table, 3) == table[min(b for b in table if b >= 3)]
    assert pick(table, 10_000) == table[max(table)]


def test_config_errors_name_the_file_and_key(tmp_path):
    with pytest.raises(ConfigError, match="unknown variant 'glm5'"):
        load_table("glm5")
    bad = tmp_path / "glm.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match=r"glm.json:1: invalid JSON"):
        load_table("glm", bad)
    data = {"schema": "cookbook.mxfp4-moe.config/1", "variant": "glm", "configs": {"8": {"block_n1": 48}}}
    bad.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"configs\[8\]: block_n1 must be a power of two"):
        load_table("glm", bad)
    with pytest.raises(ConfigError, match="unknown keys"):
        _parse_table({**data, "configs": {"8": {"blockn1": 64}}}, "x.json")


SPLITS = {
    "split": LaunchConfig(block_t=16, block_n1=32, block_k1=64, block_n2=32, block_k2=32, split1=2, split2=2),
    "split-clamped": LaunchConfig(block_t=16, block_n1=32, block_k1=64, block_n2=32, block_k2=32, split1=4, split2=4),
}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_split_k_matches_reference(name):
    """Split-K (partial sums reduced after, in a fixed order): H=192 gives 3 K steps of 64, so
    split1=2 shares them unevenly (1 + 2) and split1=4 is clamped to 3 (I=64: 2 steps of 32 for
    w2); an expert with no tokens has NaN scales and must not leak; repeat runs are identical."""
    cfg = SPLITS[name]
    rng = np.random.default_rng(30)
    e, h, i, t, k = 8, 192, 64, 7, 3
    w13p, w13s, w2p, w2s = _experts(rng, e, h, i)
    ids, wts = _routing(rng, t, 6, k)  # experts 6, 7 get no tokens
    for s in (w13s, w2s):
        s[6:] = mxfp4.SCALE_NAN
    x = torch.randn(t, h, generator=torch.Generator().manual_seed(5)).bfloat16()
    out, err = _check(x, (w13p, w13s, w2p, w2s), wts, ids, cfg)
    assert np.isfinite(out).all() and err > 0
    again = _run(x, (w13p, w13s, w2p, w2s), wts, ids, cfg)
    assert (out.view(np.uint32) == again.view(np.uint32)).all()


def test_split_out_of_range_is_refused():
    with pytest.raises(ConfigError, match="split1/split2 must be 1..64"):
        LaunchConfig(split1=128).check("test")


def test_frag_layout_is_a_permutation_and_round_trips():
    from cookbook.kernels.mxfp4_moe import frag_layout as F

    bits = sorted(F.storage_bit(p, k0, b) for p in range(4) for k0 in range(2) for b in range(4))
    assert bits == list(range(32))
    rng = np.random.default_rng(5)
    packed = torch.from_numpy(rng.integers(0, 256, (3, 32, 128), dtype=np.uint8))
    scales = torch.from_numpy(rng.integers(0, 256, (3, 32, 8), dtype=np.uint8))
    fp, fs = F.prepare(packed, scales)
    assert fp.shape == packed.shape and fp.dtype == torch.uint8 and not torch.equal(fp, packed)
    assert torch.equal(F.from_frag(fp), packed)
    assert torch.equal(F.scales_from_frag(fs, 32, 256), scales)
    with pytest.raises(ValueError, match="multiple of 16 and K=192 of 128"):
        F.to_frag(packed[:, :, :96])


@pytest.mark.parametrize("wide", [True, False])
def test_frag_layout_decodes_to_the_library_values_bit_for_bit(wide):
    """The frag layout decoded by the kernel's decoder gives exactly what cookbook.mxfp4 gives
    for the converter's bytes: all 16 codes under every scale byte (<= 128 when not wide)."""
    from cookbook.kernels.mxfp4_moe import frag_layout as F

    rng = np.random.default_rng(6)
    packed, scales = frag_codes_all_scales(rng, list(range(256)) if wide else list(range(113, 129)))
    fp, fs = F.prepare(torch.from_numpy(packed), torch.from_numpy(scales))
    out = dequantize_mxfp4(fp.to(DEV), fs.to(DEV), wide=wide, layout="frag")
    same = same_bits(out.cpu().numpy(), mxfp4.dequantize(packed, scales, np.float32))
    assert same.all(), f"{(~same).sum()} values differ"


def _frag_experts(experts):
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    return prepare_experts(*(torch.from_numpy(a) for a in experts))


FRAG_SMALL = LaunchConfig(block_t=16, block_n1=32, block_k1=128, block_n2=32, block_k2=128)


@pytest.mark.parametrize("t,k,split", [(1, 2, 1), (5, 3, 2), (33, 4, 1)])
def test_frag_layout_moe_matches_the_reference_and_the_converter_layout(t, k, split):
    rng = np.random.default_rng(31 + t)
    e, h, i = 8, 256, 128
    experts = _experts(rng, e, h, i)
    ids, wts = _routing(rng, t, e, k)
    x = torch.randn(t, h, generator=torch.Generator().manual_seed(6)).bfloat16()
    plain = _run(x, experts, wts, ids)
    cfg = replace(FRAG_SMALL, split1=split, split2=split)
    tens = [a.to(DEV) for a in _frag_experts(experts)]
    out = (
        fused_moe_mxfp4(
            x.to(DEV), *tens, torch.from_numpy(wts).to(DEV), torch.from_numpy(ids).to(DEV), config=cfg, layout="frag"
        )
        .float()
        .cpu()
        .numpy()
    )
    ref = moe_reference(x.float().numpy(), *experts, wts, ids)
    err = rel_error(out, ref)
    assert 0 < err <= TOL and rel_error(out, plain) <= TOL


@pytest.mark.parametrize("t,k,split1,split2", [(1, 4, 2, 1), (5, 3, 4, 2), (9, 2, 1, 3)])
def test_fused_epilogues_give_the_same_bits_as_the_reduce_and_top_k_launches(t, k, split1, split2):
    """fuse=True: the last split of a w13 tile adds the partials, the last program of a w2 column
    tile writes the top-k sum (atomic counters zeroed by align); same order, so the same bits."""
    rng = np.random.default_rng(40 + t)
    e, h, i = 6, 256, 256
    experts = _experts(rng, e, h, i)
    ids, wts = _routing(rng, t, e, k)
    ids[0, 0] = ids[-1, -1] = 2  # an expert with tokens from both ends of the batch
    x = torch.randn(t, h, generator=torch.Generator().manual_seed(8)).bfloat16().to(DEV)
    tens = [a.to(DEV) for a in _frag_experts(experts)]
    args = (x, *tens, torch.from_numpy(wts).to(DEV), torch.from_numpy(ids).to(DEV))
    cfg = replace(FRAG_SMALL, split1=split1, split2=split2)
    plain = fused_moe_mxfp4(*args, config=cfg, layout="frag")
    fused = fused_moe_mxfp4(*args, config=replace(cfg, fuse=True), layout="frag")
    assert torch.equal(plain.view(torch.int16), fused.view(torch.int16))
    ref = moe_reference(x.float().cpu().numpy(), *experts, wts, ids)
    assert 0 < rel_error(fused.float().cpu().numpy(), ref) <= TOL


def test_config_flags_must_be_booleans_and_modes_known():
    with pytest.raises(ConfigError, match="fuse must be true or false"):
        LaunchConfig(fuse=1).check("test")
    with pytest.raises(ConfigError, match="kernel must be one of triton, gluon"):
        LaunchConfig(kernel="cuda").check("test")
    with pytest.raises(ConfigError, match="one row group per warp: block_n1 = 16 \\* warps1"):
        LaunchConfig(kernel="gluon", decoder="asm", block_n1=128, warps1=4).check("test")
    LaunchConfig(kernel="gluon", decoder="asm", block_t=8, prefetch=2).check("test")
    with pytest.raises(ConfigError, match="taper, direct need kernel gluon, got 'triton'"):
        LaunchConfig(taper=True, direct=True).check("test")
    gluon = dict(kernel="gluon", decoder="asm", block_t=8, prefetch=1)
    LaunchConfig(**gluon, streams=3).check("test")  # used by direct, fused calls; others run on one stream
    for bad in (dict(**gluon, streams=5), dict(**gluon, streams=0), dict(streams=2)):
        with pytest.raises(ConfigError, match="streams must be 1, or 2-4 with kernel gluon"):
            LaunchConfig(**bad).check("test")


def test_gluon_kernels_say_why_they_cannot_run_here():
    """Where the Gluon kernels cannot run (interpreter, ROCm, before sm_90: ptxas rejects the
    decoder's mul.bf16x2 there, checked by `test_bf16x2_decoders_compile_for_sm90_only`; no Gluon),
    one message names the reason and the way out, before anything is launched. The facts are
    passed in: this machine has none of those GPUs."""
    from cookbook.kernels.mxfp4_moe.moe import gluon_unsupported

    ok = dict(interpret=False, device_type="cuda", hip=False, capability=(9, 0), has_gluon=True, triton_version="3.6.0")
    assert gluon_unsupported(**ok) is None
    assert gluon_unsupported(**{**ok, "capability": (10, 0)}) is None
    cases = {
        "interpret": (True, "CPU interpreter"),
        "device_type": ("cpu", "on cpu"),
        "hip": (True, "ROCm"),
        "capability": ((8, 0), "mul.bf16x2), this GPU has 8.0"),
        "has_gluon": (False, "found Triton 3.6.0"),
    }
    for key, (value, words) in cases.items():
        assert words in gluon_unsupported(**{**ok, key: value})


@pytest.mark.skipif(not _interpret(), reason="the refusal is the CPU interpreter's (on a GPU the Gluon kernels run)")
def test_gluon_kernels_refuse_the_interpreter_before_launching():
    rng = np.random.default_rng(34)
    experts = _experts(rng, 4, 128, 128)
    ids, wts = _routing(rng, 2, 4, 2)
    tens = [a.to(DEV) for a in _frag_experts(experts)]
    cfg = replace(
        FRAG_SMALL, kernel="gluon", decoder="asm", block_t=8, block_n1=64, warps1=4, block_n2=64, warps2=4, prefetch=1
    )
    with pytest.raises(MoEInputError, match="kernel 'gluon' needs a GPU .* use a table entry with kernel 'triton'"):
        fused_moe_mxfp4(
            torch.randn(2, 128).bfloat16().to(DEV),
            *tens,
            torch.from_numpy(wts).to(DEV),
            torch.from_numpy(ids).to(DEV),
            config=cfg,
            layout="frag",
        )


def test_frag_layout_never_reads_an_unrouted_expert():
    rng = np.random.default_rng(32)
    e, h, i, t, k = 8, 128, 128, 6, 2
    w13p, w13s, w2p, w2s = _experts(rng, e, h, i)
    ids, wts = _routing(rng, t, e, k)
    ids[ids == 3] = 4
    for s in (w13s, w2s):
        s[3] = 255  # NaN scales: any read of expert 3 poisons the output
    tens = [a.to(DEV) for a in _frag_experts((w13p, w13s, w2p, w2s))]
    x = torch.randn(t, h, generator=torch.Generator().manual_seed(7)).bfloat16()
    out = (
        fused_moe_mxfp4(
            x.to(DEV),
            *tens,
            torch.from_numpy(wts).to(DEV),
            torch.from_numpy(ids).to(DEV),
            config=FRAG_SMALL,
            layout="frag",
            scale_max=127,
        )
        .float()
        .cpu()
        .numpy()
    )
    assert np.isfinite(out).all()
    ref = moe_reference(x.float().numpy(), w13p, w13s, w2p, w2s, wts, ids)
    assert rel_error(out, ref) <= TOL


def test_layout_errors_name_the_fix():
    rng = np.random.default_rng(33)
    e, h, i, t, k = 4, 128, 128, 2, 2
    experts = _experts(rng, e, h, i)
    ids, wts = _routing(rng, t, e, k)
    x = torch.randn(t, h).bfloat16().to(DEV)
    tens = [a.to(DEV) for a in _frag_experts(experts)]
    args = (x, *tens, torch.from_numpy(wts).to(DEV), torch.from_numpy(ids).to(DEV))
    with pytest.raises(MoEInputError, match="layout must be one of converter, frag"):
        fused_moe_mxfp4(*args, config=FRAG_SMALL, layout="swizzled")
    with pytest.raises(MoEInputError, match="block_k1=64 and block_k2=128 to be multiples of 128"):
        fused_moe_mxfp4(*args, config=replace(FRAG_SMALL, block_k1=64), layout="frag")
    with pytest.raises(MoEInputError, match="block_n1=256 to divide I=128"):
        fused_moe_mxfp4(*args, config=replace(FRAG_SMALL, block_n1=256), layout="frag")


def _small_frag_call(seed: int) -> tuple:
    """The positional arguments of a 2-token call on 4 small frag-layout experts (for refusals)."""
    rng = np.random.default_rng(seed)
    experts = _experts(rng, 4, 128, 128)
    ids, wts = _routing(rng, 2, 4, 2)
    tens = [a.to(DEV) for a in _frag_experts(experts)]
    return (torch.randn(2, 128).bfloat16().to(DEV), *tens, torch.from_numpy(wts).to(DEV), torch.from_numpy(ids).to(DEV))


def test_a_timeline_is_refused_for_the_triton_kernels():
    with pytest.raises(MoEInputError, match="only the Gluon kernels record a timeline"):
        fused_moe_mxfp4(*_small_frag_call(35), config=FRAG_SMALL, layout="frag", trace={})


def test_a_workspace_that_cannot_hold_the_counters_is_refused_with_the_fix():
    """`workspace=` is checked before any launch: its type, its device and its size, each message
    naming moe_workspace (the kernels that count on it run on a GPU: tests/kernels/*_gpu.py)."""
    from cookbook.kernels.mxfp4_moe import moe_workspace
    from cookbook.kernels.mxfp4_moe.moe import WORKSPACE_COUNTERS, _workspace_counters, check_workspace

    cpu = torch.device("cpu")
    ws = moe_workspace(cpu)
    assert ws.dtype == torch.int32 and ws.numel() == WORKSPACE_COUNTERS and int(ws.count_nonzero()) == 0
    check_workspace(ws, cpu)
    assert _workspace_counters(ws, 100).data_ptr() == ws.data_ptr()
    with pytest.raises(
        MoEInputError, match=r"holds 4 counters, this call needs 100: .*moe_workspace\(device, size=100\)"
    ):
        _workspace_counters(moe_workspace(cpu, size=4), 100)
    for bad in (torch.zeros(64), torch.zeros(8, 8, dtype=torch.int32)):
        with pytest.raises(MoEInputError, match="1-D int32 tensor .*moe_workspace"):
            check_workspace(bad, cpu)
    # a call that would not use it (here the Triton kernels, which never take direct) still refuses a bad one
    with pytest.raises(MoEInputError, match="1-D int32 tensor .*moe_workspace"):
        fused_moe_mxfp4(*_small_frag_call(36), config=FRAG_SMALL, layout="frag", workspace=torch.zeros(64, device=DEV))
