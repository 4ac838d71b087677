"""quark-mxfp4-fuse on synthetic Quark-style checkpoints written as real safetensors files."""

import json
import subprocess

import numpy as np
import pytest
from convert_helpers import TOOLS
from quark_synthetic import make_quark_checkpoint
from safetensors import safe_open

from cookbook import mxfp4
from cookbook.convert.quark_fuse import QuarkError, fuse_checkpoint
from cookbook.convert.safetensors_io import read_bytes, read_header
from cookbook.model_folder import MARKER

H, I, E, L = 64, 32, 4, 2


@pytest.fixture(scope="module")
def quark(tmp_path_factory):
    src = make_quark_checkpoint(
        tmp_path_factory.mktemp("q") / "src", layers=L, experts=E, hidden=H, inter=I, shard_bytes=40_000
    )
    out = tmp_path_factory.mktemp("q") / "out"
    info = fuse_checkpoint(src, out, shard_bytes=50_000, progress=False)
    return src, out, info


def load_all(d):
    """name -> numpy array (uint8 / uint16 for BF16), read with the safetensors library itself."""
    index = d / "model.safetensors.index.json"
    files = (
        sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    )
    out = {}
    for f in files:
        tensors, _ = read_header(d / f)
        with safe_open(d / f, framework="pt") as st:
            for k in st.keys():
                t = tensors[k]
                raw = np.frombuffer(read_bytes(d / f, t), np.uint16 if t.dtype == "BF16" else np.uint8)
                out[k] = raw.reshape(t.shape)
                assert list(st.get_slice(k).get_shape()) == list(t.shape)
    return out


def test_output_is_sharded_with_a_consistent_index(quark):
    _, out, info = quark
    index = json.loads((out / "model.safetensors.index.json").read_text())
    files = sorted(p.name for p in out.glob("*.safetensors"))
    assert len(files) == len(info["shards"]) > 1
    assert sorted(set(index["weight_map"].values())) == files
    total = sum(t.nbytes for f in files for t in read_header(out / f)[0].values())
    assert index["metadata"]["total_size"] == total == info["bytes_out"]
    assert info["fused_layers"] == L and info["encoded_layers"] == 1 and info["shared_to_bf16"] == 3 * L


def test_experts_are_fused_byte_for_byte(quark):
    src, out, _ = quark
    a, b = load_all(src), load_all(out)
    for layer in range(L):
        p = f"model.layers.{layer}.mlp.experts"
        w13, s13 = b[f"{p}.w13_weight"], b[f"{p}.w13_weight_scale"]
        assert w13.shape == (E, 2 * I, H // 2) and s13.shape == (E, 2 * I, H // 32)
        assert b[f"{p}.w2_weight"].shape == (E, H, I // 2) and b[f"{p}.w2_weight_scale"].shape == (E, H, I // 32)
        for e in range(E):
            assert np.array_equal(w13[e, :I], a[f"{p}.{e}.gate_proj.weight"])  # gate first (w1) ...
            assert np.array_equal(w13[e, I:], a[f"{p}.{e}.up_proj.weight"])  # ... then up (w3)
            assert np.array_equal(s13[e, :I], a[f"{p}.{e}.gate_proj.weight_scale"])
            assert np.array_equal(s13[e, I:], a[f"{p}.{e}.up_proj.weight_scale"])
            assert np.array_equal(b[f"{p}.w2_weight"][e], a[f"{p}.{e}.down_proj.weight"])
            assert np.array_equal(b[f"{p}.w2_weight_scale"][e], a[f"{p}.{e}.down_proj.weight_scale"])
        assert not any(k.startswith(f"{p}.0.") for k in b)


def test_shared_experts_become_exact_bf16(quark):
    src, out, _ = quark
    a, b = load_all(src), load_all(out)
    for layer in range(L):
        for proj in ("gate", "up", "down"):
            name = f"model.layers.{layer}.mlp.shared_experts.{proj}_proj"
            want = mxfp4.dequantize(a[f"{name}.weight"], a[f"{name}.weight_scale"])
            got = mxfp4.bf16_bits_to_float32(b[f"{name}.weight"])
            assert np.array_equal(got, want)  # exact: E2M1 * 2**k fits in BF16
            assert f"{name}.weight_scale" not in b


def test_mtp_bf16_experts_are_encoded_to_mxfp4(quark):
    src, out, info = quark
    a, b = load_all(src), load_all(out)
    p = f"model.layers.{L}.mlp.experts"
    for e in range(E):
        gate = mxfp4.bf16_bits_to_float32(a[f"{p}.{e}.gate_proj.weight"])
        packed, scales = mxfp4.quantize(gate, scale_rule=info["scale_rule"])
        assert np.array_equal(b[f"{p}.w13_weight"][e, :I], packed)
        assert np.array_equal(b[f"{p}.w13_weight_scale"][e, :I], scales)
        back = mxfp4.dequantize(b[f"{p}.w2_weight"][e], b[f"{p}.w2_weight_scale"][e])
        down = mxfp4.bf16_bits_to_float32(a[f"{p}.{e}.down_proj.weight"])
        blocks = np.abs(down).reshape(-1, 32).max(axis=1, keepdims=True)
        assert (np.abs(back - down).reshape(-1, 32) <= blocks / 4 + 1e-12).all()
    # the MTP shared experts were BF16 already: copied
    assert np.array_equal(
        b[f"model.layers.{L}.mlp.shared_experts.up_proj.weight"],
        a[f"model.layers.{L}.mlp.shared_experts.up_proj.weight"],
    )


def test_other_tensors_and_files_are_copied(quark):
    src, out, _ = quark
    a, b = load_all(src), load_all(out)
    for k in (
        "model.embed_tokens.weight",
        "model.layers.0.self_attn.o_proj.weight",
        "model.layers.1.mlp.gate.weight",
        "model.norm.weight",
    ):
        assert np.array_equal(a[k], b[k])
    assert (out / "tokenizer_config.json").read_bytes() == (src / "tokenizer_config.json").read_bytes()
    cfg = json.loads((out / "config.json").read_text())
    exclude = cfg["quantization_config"]["exclude"]
    assert "model.layers.0.mlp.shared_experts.gate_proj" in exclude  # now BF16
    assert not any(x.startswith(f"model.layers.{L}.mlp.experts.") for x in exclude)  # now MXFP4
    assert "lm_head" in exclude
    hidden = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert hidden == [MARKER]  # no scratch files left; the marker of a folder the cookbook wrote


def test_missing_expert_is_a_clear_error(tmp_path):
    src = make_quark_checkpoint(tmp_path / "src", layers=1, experts=3, hidden=H, inter=I, mtp=False)
    # drop expert 1's up_proj scale by rewriting the single file without it
    from cookbook.convert.safetensors_io import Writer

    tensors, _ = read_header(src / "model.safetensors")
    keep = [t for n, t in tensors.items() if n != "model.layers.0.mlp.experts.1.up_proj.weight_scale"]
    data = {t.name: read_bytes(src / "model.safetensors", t) for t in keep}
    w = Writer(src / "model.safetensors", [(t.name, t.dtype, t.shape) for t in keep])
    for t in keep:
        w.write(t.name, data[t.name])
    w.close()
    with pytest.raises(QuarkError, match=r"experts.1.up_proj.weight_scale is missing"):
        fuse_checkpoint(src, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.tmp").exists()


def test_truncated_shard_is_a_clear_error_via_cli(tmp_path):
    src = make_quark_checkpoint(tmp_path / "src", layers=1, experts=2, hidden=H, inter=I, shard_bytes=20_000)
    shard = sorted(src.glob("*.safetensors"))[1]
    shard.write_bytes(shard.read_bytes()[:-5])
    r = subprocess.run(
        [str(TOOLS / "quark-mxfp4-fuse"), str(src), str(tmp_path / "out")], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert shard.name in r.stderr and "truncated" in r.stderr
    assert not (tmp_path / "out").exists()


def test_already_fused_checkpoint_is_refused(quark, tmp_path):
    _, out, _ = quark
    with pytest.raises(QuarkError, match="no per-expert tensors"):
        fuse_checkpoint(out, tmp_path / "again", progress=False)
