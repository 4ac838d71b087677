"""gguf-to-w8a8 / gguf-to-w4a16: the quantized checkpoints against a reference dequantization,
and the inputs they refuse.

The reference is compressed-tensors' own unpacking and dequantization (`unpack_from_int32`,
`dequantize`: what llm-compressor and vLLM's loader follow), applied to our bytes, compared with
the GGUF's float weights through gguf-py: every weight is within half a quantization step of its
source.
"""

import json

import numpy as np
import pytest
from hostile_helpers import assert_clean_error, gguf_file, run_tool, str_array

from cookbook.convert.gguf_to_ct import (
    convert_gguf_to_ct,
    dequantize_reference,
    pack_int4,
    quantization_config,
    quantize_rows,
    quantize_rows_int8,
)
from cookbook.convert.safetensors_io import read_bytes, read_header
from cookbook.gguf import GGUFError
from cookbook.gguf.format import ValueType

torch = pytest.importorskip("torch", reason="torch is needed for compressed-tensors' unpacking (make engine)")
ct_helpers = pytest.importorskip("compressed_tensors.compressors.pack_quantized.helpers")


def ct_dequantize(packed, scale, zero_packed, shape, group_size):
    """compressed-tensors' dequantization of a pack-quantized asymmetric group tensor."""
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.lifecycle.forward import dequantize

    rows, cols = shape
    q = ct_helpers.unpack_from_int32(torch.from_numpy(packed), 4, torch.Size(shape), packed_dim=1)
    groups = cols // group_size
    zp = ct_helpers.unpack_from_int32(torch.from_numpy(zero_packed), 4, torch.Size((rows, groups)), packed_dim=0)
    args = QuantizationArgs(num_bits=4, type="int", symmetric=False, strategy="group", group_size=group_size)
    return dequantize(q, torch.from_numpy(scale), zp, args=args, dtype=torch.float32).numpy()


@pytest.mark.parametrize("group_size", [32, 128])
def test_quantize_and_pack_match_compressed_tensors(group_size):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 256)).astype(np.float32)
    w[3] = 0.0  # an all-zero row: scale 1, zero point at 0
    w[5, :group_size] += 4.0  # a group that is all positive: the range still holds 0
    q, scale, zero = quantize_rows(w, group_size, "float32")
    ours = dequantize_reference(q, scale, zero, group_size)
    theirs = ct_dequantize(pack_int4(q, 1), scale, pack_int4(zero, 0), w.shape, group_size)
    np.testing.assert_array_equal(ours, theirs)
    step = np.repeat(scale, group_size, axis=1)
    assert np.all(np.abs(ours - w) <= step / 2 + 1e-6)
    assert np.all(ours[3] == 0.0)


def test_int8_rows_match_compressed_tensors():
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.lifecycle.forward import dequantize

    rng = np.random.default_rng(2)
    w = rng.standard_normal((16, 96)).astype(np.float32)
    w[4] = 0.0
    q, scale = quantize_rows_int8(w)
    assert q.dtype == np.int8 and scale.shape == (16, 1) and q.min() >= -127
    args = QuantizationArgs(num_bits=8, type="int", symmetric=True, strategy="channel")
    theirs = dequantize(torch.from_numpy(q), torch.from_numpy(scale), None, args=args, dtype=torch.float32).numpy()
    np.testing.assert_array_equal(q.astype(np.float32) * scale, theirs)
    assert np.all(np.abs(theirs - w) <= scale / 2 + 1e-7)
    assert np.all(theirs[4] == 0.0)


def test_pack_int4_bit_order_is_compressed_tensors():
    q = np.array([[-8, -7, 0, 1, 2, 3, 6, 7]], dtype=np.int8)
    ours = pack_int4(q, 1)
    theirs = ct_helpers.pack_to_int32(torch.from_numpy(q), 4, packed_dim=1).numpy()
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(
        pack_int4(q.T.copy(), 0), ct_helpers.pack_to_int32(torch.from_numpy(q.T.copy()), 4, packed_dim=0).numpy()
    )


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_narrow_scales_are_the_stored_ones_rounded_up(dtype):
    """The integers are rounded against the scale the checkpoint stores, rounded up, so every
    weight stays within half a step. Rounded to nearest instead, 85 of these 262,144 weights were
    up to a full step off (the top of a group clipped at 7)."""
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((4096, 64)) * 0.037).astype(np.float32)
    q, scale, zero = quantize_rows(w, 32, dtype)
    narrow = scale.astype(np.float16 if dtype == "float16" else np.float32)
    if dtype == "bfloat16":
        assert np.all((scale.view(np.uint32) & 0xFFFF) == 0)  # exactly representable in bfloat16
    else:
        assert np.array_equal(narrow.astype(np.float32), scale)
    deq = dequantize_reference(q, scale, zero, 32)
    assert np.all(np.abs(deq - w) <= np.repeat(scale, 32, axis=1) / 2 + 1e-7)


@pytest.fixture(scope="session")
def gemma_ct(tmp_path_factory, gemma_gguf):
    """The packaged Gemma in both schemes, converted once each."""
    made = {}

    def get(scheme):
        if scheme not in made:
            out = tmp_path_factory.mktemp(scheme) / f"gemma-{scheme}"
            made[scheme] = out, convert_gguf_to_ct(gemma_gguf, out, scheme=scheme, progress=False)
        return made[scheme]

    return get


def gguf_rows(path, name, limit=None):
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    from cookbook.gguf.reader import read_gguf

    g = read_gguf(path)
    t = next(t for t in g.tensors if t.name == name)
    rows = t.shape[0] if limit is None else min(limit, t.shape[0])
    row_bytes = t.nbytes // t.shape[0]
    with open(path, "rb") as f:
        f.seek(g.tensor_offset(t))
        raw = np.frombuffer(f.read(rows * row_bytes), dtype=np.uint8)
    return t, np.asarray(dequantize(raw.reshape(rows, -1), GGMLQuantizationType(int(t.type))), np.float32)


LAYERS = [
    ("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj"),  # Q5_0
    ("blk.17.ffn_down.weight", "model.layers.17.mlp.down_proj"),  # Q6_K or Q4_K
    ("token_embd.weight", "lm_head"),  # Q8_0, the tied head made its own quantized tensor
]


@pytest.mark.parametrize("gguf_name,hf_base", LAYERS)
def test_packaged_gemma_w4a16_is_within_half_a_step_of_the_gguf(gemma_ct, gemma_gguf, gguf_name, hf_base):
    out, info = gemma_ct("w4a16")
    t, src = gguf_rows(gemma_gguf, gguf_name, limit=4096)  # the head's 262,144 rows: the first 4,096
    st = out / info["weights"][0]
    tensors, _ = read_header(st)

    def arr(name, dtype):
        return np.frombuffer(read_bytes(st, tensors[f"{hf_base}.{name}"]), dtype=dtype)

    shape = tuple(tensors[f"{hf_base}.weight_packed"].shape)
    assert shape[1] * 8 == t.shape[1] and arr("weight_shape", "<i8").tolist() == list(t.shape)
    n = src.shape[0]
    packed = arr("weight_packed", "<i4").reshape(shape)[:n]
    scale = (arr("weight_scale", "<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape[0], -1)[:n]
    zp = arr("weight_zero_point", "<i4").reshape(shape[0] // 8, -1)[: n // 8]
    deq = ct_dequantize(packed, scale, zp, (n, t.shape[1]), 32)
    assert np.all(np.abs(deq - src) <= np.repeat(scale, 32, axis=1) / 2 + 1e-6)


@pytest.mark.parametrize("gguf_name,hf_base", LAYERS)
def test_packaged_gemma_w8a8_is_within_half_a_step_of_the_gguf(gemma_ct, gemma_gguf, gguf_name, hf_base):
    out, info = gemma_ct("w8a8")
    t, src = gguf_rows(gemma_gguf, gguf_name, limit=4096)
    st = out / info["weights"][0]
    tensors, _ = read_header(st)
    w = tensors[f"{hf_base}.weight"]
    assert w.dtype == "I8" and w.shape == t.shape
    n = src.shape[0]
    q = np.frombuffer(read_bytes(st, w), dtype=np.int8).reshape(t.shape)[:n]
    scale = np.frombuffer(read_bytes(st, tensors[f"{hf_base}.weight_scale"]), dtype="<f4").reshape(-1, 1)[:n]
    assert np.all(np.abs(q.astype(np.float32) * scale - src) <= scale / 2 + 1e-7)


@pytest.mark.parametrize("scheme", ["w8a8", "w4a16"])
def test_packaged_gemma_config_unties_the_quantized_head(gemma_ct, scheme):
    out, info = gemma_ct(scheme)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["tie_word_embeddings"] is False
    assert cfg["quantization_config"] == quantization_config(scheme, 32, head=True)
    assert info["lm_head"] == scheme
    tensors, _ = read_header(out / info["weights"][0])
    assert tensors["model.embed_tokens.weight"].dtype == "BF16"  # the lookup stays float
    weight = "lm_head.weight" if scheme == "w8a8" else "lm_head.weight_packed"
    assert tensors[weight].dtype in ("I8", "I32")
    quantized = [n for n in tensors if n.endswith("proj.weight") or n.endswith("proj.weight_packed")]
    assert all(tensors[n].dtype in ("I8", "I32") for n in quantized) and len(quantized) == 7 * 18
    assert (out / "tokenizer.json").exists() and (out / "generation_config.json").exists()


# --- refused inputs: one message, nothing written ---


def gemma3_like(path, hidden: int, tokens=("a", "b", "c", "d")):
    """A complete one-block gemma3 GGUF (F32 zeros) of the given width."""
    ff, kv = 2 * hidden, hidden // 2
    dims = {
        "token_embd.weight": (hidden, 64),
        "output_norm.weight": (hidden,),
        "blk.0.attn_q.weight": (hidden, hidden),
        "blk.0.attn_k.weight": (hidden, kv),
        "blk.0.attn_v.weight": (hidden, kv),
        "blk.0.attn_output.weight": (hidden, hidden),
        "blk.0.attn_q_norm.weight": (kv,),
        "blk.0.attn_k_norm.weight": (kv,),
        "blk.0.attn_norm.weight": (hidden,),
        "blk.0.post_attention_norm.weight": (hidden,),
        "blk.0.ffn_norm.weight": (hidden,),
        "blk.0.post_ffw_norm.weight": (hidden,),
        "blk.0.ffn_gate.weight": (hidden, ff),
        "blk.0.ffn_up.weight": (hidden, ff),
        "blk.0.ffn_down.weight": (ff, hidden),
    }
    kvs = [
        ("general.architecture", ValueType.STRING, "gemma3"),
        ("gemma3.block_count", ValueType.UINT32, 1),
        ("tokenizer.ggml.tokens", ValueType.ARRAY, str_array(list(tokens))),
    ]
    return gguf_file(path, kvs=kvs, tensors=list(dims.items()))


def test_refuses_shapes_the_4bit_kernel_cannot_take(tmp_path):
    g = gemma3_like(tmp_path / "g.gguf", hidden=48)  # 48 is no multiple of 32
    r = run_tool("gguf-to-w4a16", g, tmp_path / "o")
    assert_clean_error(r, "token_embd.weight is 64 x 48", "multiples of 32", "(and 7 more)")
    assert "help:" in r.stderr
    assert not (tmp_path / "o").exists() and list(tmp_path.iterdir()) == [g]


def test_refuses_a_group_that_does_not_divide_the_inputs(tmp_path):
    g = gemma3_like(tmp_path / "g.gguf", hidden=96)  # 96 inputs: 32 divides, 64 does not
    r = run_tool("gguf-to-w4a16", g, tmp_path / "o", "--group-size", "64")
    assert_clean_error(r, "96 inputs, not a multiple of the group size 64")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("tool", ["gguf-to-w8a8", "gguf-to-w4a16"])
@pytest.mark.parametrize("keep", [100_000, -16])
def test_truncated_gemma_gguf_is_one_message_and_writes_nothing(tmp_path, gemma_gguf, keep, tool):
    """The packaged file cut short: in the header (its vocabulary), and in the last tensor's data."""
    data = gemma_gguf.read_bytes()
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(data[:keep])
    r = run_tool(tool, bad, tmp_path / "o")
    assert_clean_error(r, "cut.gguf")
    assert "help:" in r.stderr
    assert not (tmp_path / "o").exists() and list(tmp_path.iterdir()) == [bad]


def test_refuses_a_gguf_missing_tensors_and_a_non_gguf(tmp_path):
    g = gguf_file(
        tmp_path / "g.gguf",
        kvs=[
            ("general.architecture", ValueType.STRING, "gemma3"),
            ("gemma3.block_count", ValueType.UINT32, 2),
            ("tokenizer.ggml.tokens", ValueType.ARRAY, str_array(["a"])),
        ],
        tensors=[("token_embd.weight", (32, 4))],
    )
    assert_clean_error(run_tool("gguf-to-w4a16", g, tmp_path / "o"), "missing", "blk.0.attn_q.weight")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"\x1b[2Jnot a gguf" * 10)
    r = run_tool("gguf-to-w4a16", junk, tmp_path / "o2")
    assert_clean_error(r, "junk.gguf")
    assert "\x1b" not in r.stderr
    assert not (tmp_path / "o").exists() and not (tmp_path / "o2").exists()


def test_api_refuses_an_unknown_scheme_and_an_unlisted_group_size(small_gguf, tmp_path):
    from cookbook.convert.gguf_to_ct import check_shapes

    with pytest.raises(GGUFError, match="group size 48"):
        check_shapes(None, {}, "w4a16", 48, True)
    with pytest.raises(GGUFError, match="scheme 'w2'"):
        convert_gguf_to_ct(small_gguf, tmp_path / "o", scheme="w2")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("tool", ["gguf-to-w8a8", "gguf-to-w4a16"])
def test_a_fifo_is_refused_up_front_and_a_full_output_folder_kept(tmp_path, tool):
    import os

    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    assert_clean_error(run_tool(tool, fifo, tmp_path / "o", timeout=30), "FIFO")
    g = gemma3_like(tmp_path / "g.gguf", hidden=64)
    out = tmp_path / "full"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    r = run_tool(tool, g, out)
    assert_clean_error(r, "full", "the cookbook writes only into a folder it created")
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    # --force replaces only a folder the cookbook made (cookbook.model_folder): a user's is kept
    r = run_tool(tool, g, out, "--force")
    assert_clean_error(r, "full", "the cookbook writes only into a folder it created")
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
