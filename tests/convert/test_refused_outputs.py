"""Class 4: output that cannot be right is refused (order unverifiable, wrong shapes, missing tensors, bad input)."""

import pytest
from hostile_helpers import assert_clean_error, gguf_file, quark_dir, quark_tensors, run_tool, str_array

from cookbook.convert.gguf_join import split_raw
from cookbook.gguf.format import ValueType


def parts_of_equal_size(tmp_path):
    g = gguf_file(tmp_path / "m.gguf", tensors=[(f"t{i}.weight", (64,)) for i in range(6)])
    size = g.stat().st_size
    assert size % 3 == 0 or True
    return split_raw(g, 3, tmp_path)


def test_join_without_checksum_is_refused_unless_opted_out(tmp_path):
    parts = parts_of_equal_size(tmp_path)
    out = tmp_path / "j.gguf"
    r = run_tool("gguf-join", *parts, "-o", out)
    assert_clean_error(r, "no sha256", "--no-checksum")
    assert not out.exists()
    r = run_tool("gguf-join", *parts, "-o", out, "--no-checksum")
    assert r.returncode == 0, r.stderr
    assert "warning:" in r.stderr and "not verified" in r.stderr


def test_join_of_parts_out_of_name_order_is_refused(tmp_path):
    p0, p1, p2 = parts_of_equal_size(tmp_path)
    assert p1.stat().st_size == p2.stat().st_size  # equal sizes: the swapped join parses alike
    r = run_tool("gguf-join", p0, p2, p1, "-o", tmp_path / "j.gguf", "--no-checksum")
    assert_clean_error(r, "out of order", "part01")
    assert not (tmp_path / "j.gguf").exists()


def test_quark_refuses_transposed_down_proj(tmp_path):
    # H=64, I=32: down_proj must be [H, I/2] = [64, 16]; [32, 32] is the transposed [I, H/2]
    src = quark_dir(tmp_path / "src", quark_tensors(down=(32, 32)))
    assert_clean_error(run_tool("quark-mxfp4-fuse", src, tmp_path / "out"), "down_proj", "(64, 16)")
    assert not (tmp_path / "out").exists()


def test_quark_refuses_up_shape_unlike_gate(tmp_path):
    src = quark_dir(tmp_path / "src", quark_tensors(up=(16, 32)))
    assert_clean_error(run_tool("quark-mxfp4-fuse", src, tmp_path / "out"), "up_proj")


def test_quark_refuses_fractional_scale_groups(tmp_path):
    # H=48: 48/32 is not a whole number of E8M0 groups
    src = quark_dir(tmp_path / "src", quark_tensors(H=48, gate_scale=(32, 1)))
    assert_clean_error(run_tool("quark-mxfp4-fuse", src, tmp_path / "out"), "multiples of 32")


def test_quark_refuses_transposed_bf16_down_proj(tmp_path):
    src = quark_dir(tmp_path / "src", quark_tensors(bf16=True, down=(32, 64)))
    assert_clean_error(run_tool("quark-mxfp4-fuse", src, tmp_path / "out"), "down_proj", "(64, 32)")


def test_quark_refuses_a_shared_expert_with_a_scale_but_no_weight(tmp_path):
    t = quark_tensors()
    t["model.layers.0.mlp.shared_experts.gate_proj.weight_scale"] = ("U8", (32, 2))
    assert_clean_error(
        run_tool("quark-mxfp4-fuse", quark_dir(tmp_path / "src", t), tmp_path / "out"),
        "shared_experts.gate_proj.weight",
    )


def gemma3_like(path, tensors):
    kvs = [
        ("general.architecture", ValueType.STRING, "gemma3"),
        ("gemma3.block_count", ValueType.UINT32, 2),
        ("tokenizer.ggml.tokens", ValueType.ARRAY, str_array(["a", "b", "c", "d"])),
    ]
    return gguf_file(path, kvs=kvs, tensors=tensors)


def test_to_hf_refuses_a_gguf_missing_most_tensors(tmp_path):
    g = gemma3_like(tmp_path / "g.gguf", [("token_embd.weight", (8, 4))])
    r = run_tool("gguf-to-hf", g, tmp_path / "o")
    assert_clean_error(r, "missing", "blk.0.attn_q.weight")
    assert not (tmp_path / "o").exists()


def test_to_hf_refuses_a_block_beyond_block_count(tmp_path):
    g = gemma3_like(tmp_path / "g.gguf", [("token_embd.weight", (8, 4)), ("blk.7.attn_q.weight", (8, 8))])
    assert_clean_error(run_tool("gguf-to-hf", g, tmp_path / "o"), "blk.7")


@pytest.mark.parametrize("damage", ["truncated", "bad_tensor_info"])
def test_in_place_set_refuses_a_file_inspect_rejects(tmp_path, damage):
    g = gguf_file(
        tmp_path / "g.gguf",
        kvs=[("test.flag", ValueType.BOOL, False)],
        tensors=[("a.weight", (8,)), ("b.weight", (8,))],
    )
    data = g.read_bytes()
    if damage == "truncated":
        data = data[:-16]
    else:
        i = data.index(b"b.weight") + len(b"b.weight")
        data = data[:i] + b"\x09" + data[i + 1 :]  # n_dims 9
    g.write_bytes(data)
    assert run_tool("gguf-inspect", g).returncode == 2
    r = run_tool("gguf-set", g, "test.flag=true")
    assert_clean_error(r, "g.gguf")
    assert g.read_bytes() == data  # untouched
