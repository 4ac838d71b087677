"""`cookbook plan` on real files and real recipes: weights from the packaged Gemma GGUF's
tensor table, KV geometry from its header, MLA vs GQA arithmetic, and the JSON schema."""

import json

import jsonschema
import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.gguf.reader import read_gguf
from cookbook.plan import kv as K
from cookbook.plan.budget import make_plan
from cookbook.plan.geometry import from_recipe
from cookbook.plan.render import PLAN_JSON_SCHEMA
from cookbook.recipe.model import Architecture, Indexer
from cookbook.recipe.resolve import resolve

H200_MIB = 143156  # torch's total on the H200 (nvidia-smi: 143771)


def plan_json(*args):
    r = CliRunner().invoke(main, ["plan", *args, "--json"])
    return r, (json.loads(r.stdout[: r.stdout.rindex("}") + 1]) if "{" in r.stdout else None)


def test_planned_weight_bytes_equal_the_gemma_gguf_tensor_bytes(gemma_gguf, gemma_gguf_py):
    reference = sum(int(t.n_bytes) for t in gemma_gguf_py.tensors)
    r, out = plan_json("gemma3-270m-cpu", "--checkpoint", str(gemma_gguf))
    assert r.exit_code == 0, r.output
    assert out["weights"]["total_bytes"] == reference
    assert sum(g["bytes"] for g in out["weights"]["groups"]) == reference
    groups = {g["name"]: g for g in out["weights"]["groups"]}
    # Q4_K_M keeps the (tied) embedding at Q8_0: 8.5 bits per weight, 262144 x 640 of them.
    assert groups["embeddings"]["elements"] == 262144 * 640
    assert groups["embeddings"]["bits_per_weight"] == pytest.approx(8.5)
    assert "lm_head" not in groups


def test_gemma_kv_geometry_comes_from_the_gguf_header(gemma_gguf):
    g = read_gguf(gemma_gguf)
    layers, kv_heads, head_dim = (
        g.get(f"gemma3.{k}") for k in ("block_count", "attention.head_count_kv", "attention.key_length")
    )
    assert (layers, kv_heads, head_dim, g.get("gemma3.attention.sliding_window")) == (18, 1, 256, 512)
    r, out = plan_json("gemma3-270m-cpu", "--checkpoint", str(gemma_gguf), "--platform", "h200")
    parts = {p["name"]: p for p in out["kv"]["parts"]}
    # 5 of every 6 layers slide (google/gemma-3-270m layer_types); BF16 K and V, one head of 256.
    assert parts["attention (sliding window)"]["layers"] == 15 and parts["attention (sliding window)"]["window"] == 512
    assert parts["attention (full)"]["layers"] == 3
    # every token adds the 3 full layers' K/V; the 15 sliding layers are charged once a sequence
    per_layer = 2 * kv_heads * head_dim * 2
    assert out["kv"]["bytes_per_token"] == 3 * per_layer == 3072
    assert parts["attention (sliding window)"]["bytes_per_token"] == 15 * per_layer


def test_h200_kv_pool_prediction_for_the_lead(gemma_gguf):
    """What the lead compares with vLLM's 'Available KV cache memory' line on the H200:
    0.9 x 143156 MiB (torch's total, what vLLM multiplies) less the weights, the activation
    peak and non-torch memory."""
    r, out = plan_json(
        "gemma3-270m-cpu",
        "--checkpoint",
        str(gemma_gguf),
        "--platform",
        "h200",
        "--set",
        "serve.args.gpu_memory_utilization=0.9",
    )
    m = out["memory"]
    assert m["device_bytes"] == H200_MIB * 2**20
    assert m["requested_bytes"] == int(H200_MIB * 2**20 * 0.9)
    assert (
        m["vllm_pool_bytes"] == m["requested_bytes"] - m["weights_bytes"] - m["activation_bytes"] - m["non_torch_bytes"]
    )
    assert 120 * 2**30 < m["vllm_pool_bytes"] < 0.9 * H200_MIB * 2**20
    assert m["pool_tokens"] == int(m["pool_bytes"] // out["kv"]["vllm_bytes_per_token"])


def test_mla_latent_is_the_same_on_every_tp_rank_and_gqa_shards():
    two, four = resolve("glm52-2"), resolve("glm52-4")
    kv2, kv4 = make_plan(two).kv, make_plan(four).kv
    latent2 = next(p for p in kv2.parts if p.name == "MLA latent")
    latent4 = next(p for p in kv4.parts if p.name == "MLA latent")
    assert latent2.bytes_per_token == latent4.bytes_per_token == 78 * (512 + 64) * 1  # fp8
    gqa = from_recipe(Architecture(layers=10, attention="gqa", kv_heads=8, head_dim=128))
    per = [K.per_token(gqa, tp=tp).bytes_per_token for tp in (1, 2, 8, 16)]
    assert per == [10 * 2 * 8 * 128 * 2, 10 * 2 * 4 * 128 * 2, 10 * 2 * 1 * 128 * 2, 10 * 2 * 1 * 128 * 2]


def test_kv_dtypes_and_fp8_ds_mla_packing():
    mla = from_recipe(
        Architecture(
            layers=78,
            attention="mla",
            kv_lora_rank=512,
            qk_rope_head_dim=64,
            indexer=Indexer(heads=32, head_dim=128, layers=21),
        )
    )
    auto = K.per_token(mla, tp=4)
    fp8 = K.per_token(mla, tp=4, kv_dtype="fp8")
    ds = K.per_token(mla, tp=4, kv_dtype="fp8_ds_mla")
    dcp = K.per_token(mla, tp=4, kv_dtype="fp8_ds_mla", dcp=4)
    latent = lambda kv: next(p.bytes_per_token for p in kv.parts if p.name == "MLA latent")  # noqa: E731
    assert (latent(auto), latent(fp8), latent(ds), latent(dcp)) == (78 * 1152, 78 * 576, 78 * 656, 78 * 656 / 4)
    assert next(p.bytes_per_token for p in auto.parts if "indexer" in p.name) == 21 * 132
    with pytest.raises(ValueError, match="unknown kv_cache_dtype"):
        K.per_token(mla, tp=1, kv_dtype="fp7")


def test_mtp_and_draft_kv_are_counted():
    gaudi = make_plan(resolve("glm52-mxfp4-8x-gaudi2"))  # MTP, one layer
    assert any(p.name == "MTP layer" and p.bytes_per_token == 1152 for p in gaudi.kv.parts)
    # DSpark draft, 3 layers, TP-sharded like the target, its KV at the target's fp8: the document's
    # TurboQuant draft KV (0.78 bytes a value) counts only where the launch block turns it on (issue 65)
    glm = make_plan(resolve("glm52-2"))
    draft = next(p for p in glm.kv.parts if p.name == "draft model")
    assert draft.bytes_per_token == pytest.approx(3 * 2 * 8 * 64 * 1)
    a100 = make_plan(resolve("glm52-4-a100"))  # draft replicated per GPU (draft_tensor_parallel_size 1)
    assert next(p for p in a100.kv.parts if p.name == "draft model").bytes_per_token == pytest.approx(
        3 * 2 * 16 * 64 * 1
    )


@pytest.mark.parametrize(
    "args",
    [
        ["glm52-2"],
        # refused by the plan (its rules pass): still one JSON document
        ["glm52-2", "--set", "serve.args.kv_cache_memory_bytes=300000000000"],
        ["dsv4-4"],
        ["k3-6"],
        ["glm52-mxfp4-8x-gaudi2"],
        ["glm52-nvfp4-4x-rtxpro6000"],
        ["gemma3-270m-cpu"],
    ],
)
def test_plan_json_matches_its_schema(args):
    r, out = plan_json(*args)
    assert out is not None, r.output
    if "error" in out:  # a refused plan: the one document is the error object, the plan in it
        assert out["error"]["exit_code"] == r.exit_code == 2
        out = out["error"]["plan"]
    jsonschema.validate(out, PLAN_JSON_SCHEMA)
    assert r.exit_code == (0 if out["fits"] else 2)
    assert out["fits"] == (not out["refusals"])


def test_a_configuration_that_does_not_fit_is_refused_with_its_numbers():
    # Q4_K on 2 GPUs: the recipe's rules refuse it first, as `show` does (R103/R106, exit 2) ...
    r = CliRunner().invoke(main, ["plan", "glm52-4", "--quant", "Q4_K", "--gpus", "2"])
    assert r.exit_code == 2 and r.stderr.startswith("error: cannot plan glm52-4")
    assert "R106 rules.weights-fit-vram" in r.stderr and "Traceback" not in r.output
    # ... and the plan's own numbers refuse what the rules let through (404 / 2 with the draft and
    # the vision tower: 207.93 GiB per GPU), with --set standing in for a rule-free recipe.
    p = make_plan(resolve("glm52-4", "Q4_K"), gpus=2)
    assert not p.fits and "207.93 GiB per GPU" in p.refusals[0] and "exceed the device's 191.69 GiB" in p.refusals[0]
    # A context too long for the pool: the help names the context that fits.
    one = ["--seqs", "1", "--set", "serve.args.speculative_config=null"]
    r = CliRunner().invoke(
        main, ["plan", "glm52-2", "--ctx", "1048576", *one, "--set", "serve.args.kv_cache_memory_bytes=20000000000"]
    )
    assert r.exit_code == 2 and "one sequence of 1,048,576 tokens needs" in r.stderr
    assert "help: --ctx " in r.stderr and "fits 1 sequence(s)" in r.stderr


def test_plan_applies_the_recipes_rules_as_show_does():
    """Issue 47: `plan --ctx` used to answer "1 fit at once" where `show --set` refused with R106."""
    r = CliRunner().invoke(main, ["plan", "glm52-2", "--ctx", "1048576"])
    shown = CliRunner().invoke(main, ["show", "glm52-2", "--set", "max_model_len=1048576"])
    assert r.exit_code == shown.exit_code == 2
    assert "R106 rules.one-million-on-two-gpus" in r.stderr and "the weights leave only ~63 GiB" in r.stderr
    assert "help: add --set serve.args.speculative_config=null" in r.stderr
    assert r.stderr.split("\n", 1)[1] == shown.stderr.split("\n", 1)[1]  # the same refusal, word for word
    ok = CliRunner().invoke(
        main, ["plan", "glm52-2", "--ctx", "1048576", "--set", "serve.args.speculative_config=null", "--seqs", "1"]
    )
    assert ok.exit_code == 0, ok.output
    assert "1 fit at once" in ok.stdout and "left after weights" in ok.stdout
    # --gpus N is one TP group of N for the rules too (TP 2 on 3 GPUs would be refused by tp-divides-gpus)
    assert CliRunner().invoke(main, ["plan", "glm52-2", "--gpus", "4"]).exit_code == 0


def test_left_after_weights_is_the_documents_figure():
    """SlimServe: "the weights leave only ~63 GiB per card" on 2x MI300X."""
    from cookbook.units import GIB

    p = make_plan(resolve("glm52-2"))
    assert p.left_after_weights_bytes == p.setup.device_bytes - p.weights_per_gpu_bytes
    assert 60 * GIB < p.left_after_weights_bytes < 66 * GIB
    r, out = plan_json("glm52-2")
    assert out["memory"]["left_after_weights_bytes"] == p.left_after_weights_bytes


@pytest.mark.parametrize(
    "args",
    [
        ["glm52-2", "--set", "tensor_parallel_size=-4"],
        ["glm52-2", "--set", "model.architecture.layers=-1"],
        ["glm52-2", "--ctx", str(2**62)],
        ["glm52-2", "--set", "block_size=0"],
        ["glm52-2", "--set", "model.architecture.attention_heads=0"],
        ["glm52-2", "--set", "model.architecture.kv_lora_rank=0"],
        ["glm52-2", "--gpus", str(2**64)],
        ["glm52-2", "--device-mib", str(2**40)],
        ["glm52-2", "--set", "gpu_memory_utilization=0"],
        ["glm52-2", "--set", "model.source.size_gib=0"],
        ["glm52-2", "--device-mib", "1"],  # possible to ask, nothing fits: refused, never "0 fit" and exit 0
        ["glm52-2", "--set", "serve.args.speculative_config=abc"],  # vLLM takes JSON text; the plan needs it to parse
        ["gemma3-270m-cpu", "--set", "VLLM_CPU_KVCACHE_SPACE=abc"],  # the CPU pool is this many GiB
    ],
)
def test_the_impossible_is_refused_not_planned(args):
    """Issue 48 item 10: counts are at least 1 and sizes above 0; a plan where nothing fits exits 2."""
    r = CliRunner().invoke(main, ["plan", *args])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit)
    assert "0 fit at once" not in r.output


def test_bad_checkpoint_is_one_clear_message(tmp_path):
    r = CliRunner().invoke(main, ["plan", "gemma3-270m-cpu", "--checkpoint", str(tmp_path / "nope.gguf")])
    assert r.exit_code == 2 and "no such file" in r.stderr and "help:" in r.stderr
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 20)
    r = CliRunner().invoke(main, ["plan", "gemma3-270m-cpu", "--checkpoint", str(bad)])
    assert r.exit_code == 2 and "bad.gguf" in r.stderr and "Traceback" not in r.output


def test_launch_renders_the_planned_pool_where_the_recipe_asks():
    r = CliRunner().invoke(main, ["launch", "glm52-2"])
    assert r.exit_code == 0, r.output
    planned = make_plan(resolve("glm52-2")).pool_bytes
    assert f"--kv-cache-memory-bytes {planned}" in r.stdout
    assert "# --kv-cache-memory-bytes: from the memory plan (`cookbook plan glm52-2 --quant Q2_K`)" in r.stdout
    # A value the user sets wins; a recipe that does not ask gets none.
    r = CliRunner().invoke(main, ["launch", "glm52-2", "--set", "serve.args.kv_cache_memory_bytes=42949672960"])
    assert r.stdout.count("--kv-cache-memory-bytes") == 1 and "--kv-cache-memory-bytes 42949672960" in r.stdout
    # a pool too small for one full-length sequence is refused, as `cookbook plan` refuses it
    r = CliRunner().invoke(main, ["launch", "glm52-2", "--set", "serve.args.kv_cache_memory_bytes=1000"])
    assert r.exit_code == 2 and "--kv-cache-memory-bytes" not in r.stdout
    assert "--kv-cache-memory-bytes" not in CliRunner().invoke(main, ["launch", "glm52-mxfp4-8x-gaudi2"]).stdout
    # The generated page shows the same block.
    from cookbook.recipe import paths

    page = (paths.repo_root() / "docs" / "recipes" / "glm52-2.md").read_text()
    assert f"--kv-cache-memory-bytes {planned}" in page


def test_safetensors_shards_weights_equal_their_tensor_bytes(tmp_path):
    """Two shards written by the reference library (safetensors), a DeepSeek-style MoE layer and
    its MTP layer (index 1 of a 1-layer model), packed MXFP4 experts as U8 beside BF16/F32."""
    np = pytest.importorskip("numpy")
    st = pytest.importorskip("safetensors.numpy")
    shard1 = {
        "model.embed_tokens.weight": np.zeros((64, 32), np.float16),
        "model.layers.0.self_attn.kv_a_proj_with_mqa.weight": np.zeros((24, 32), np.float16),
        "model.layers.0.self_attn.indexer.wk.weight": np.zeros((16, 32), np.float16),
        "model.layers.0.mlp.gate.weight": np.zeros((4, 32), np.float32),
        "model.layers.0.input_layernorm.weight": np.zeros((32,), np.float32),
    }
    shard2 = {
        **{f"model.layers.0.mlp.experts.{e}.gate_up_proj.weight": np.zeros((32, 16), np.uint8) for e in range(4)},
        "model.layers.0.mlp.shared_experts.down_proj.weight": np.zeros((32, 8), np.float16),
        "model.layers.1.mlp.experts.0.down_proj.weight": np.zeros((32, 8), np.uint8),
        "lm_head.weight": np.zeros((64, 32), np.float16),
    }
    st.save_file(shard1, str(tmp_path / "model-00001-of-00002.safetensors"))
    st.save_file(shard2, str(tmp_path / "model-00002-of-00002.safetensors"))
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "num_hidden_layers": 1,
                "hidden_size": 32,
                "kv_lora_rank": 16,
                "qk_rope_head_dim": 8,
                "n_routed_experts": 4,
            }
        )
    )
    expected = {
        "embeddings": 64 * 32 * 2,
        "attention": 24 * 32 * 2,
        "indexer": 16 * 32 * 2,
        "router": 4 * 32 * 4,
        "norms": 32 * 4,
        "routed_experts": 4 * 32 * 16,
        "shared_experts": 32 * 8 * 2,
        "mtp": 32 * 8,
        "lm_head": 64 * 32 * 2,
    }
    # the toy stands in for GLM-5.2 at its own width (a checkpoint of another width is refused)
    sets = ["--set", "model.architecture.hidden_size=32"]
    r, out = plan_json("glm52-mxfp4-8x-gaudi2", "--checkpoint", str(tmp_path), *sets)
    groups = {g["name"]: g for g in out["weights"]["groups"]}
    assert {k: g["bytes"] for k, g in groups.items()} == expected
    assert out["weights"]["total_bytes"] == sum(a.nbytes for a in (shard1 | shard2).values())
    assert groups["routed_experts"]["dtypes"] == {"U8": 4 * 32 * 16}
    assert groups["routed_experts"]["per_gpu_bytes"] == 4 * 32 * 16 // 8  # TP 8


# vLLM 0.26.0 on the H200 at start, serving gemma3-270m-h200 (2026-12-01 13:39 UTC, server.log of the
# run whose bundle is recipes/gemma3-270m-h200/evidence/): "Available KV cache memory: 122.57 GiB".
VLLM_H200_KV_GIB = 122.57


def test_the_h200_plan_from_the_packaged_gguf_is_within_10pct_of_vllms_pool(gemma_gguf):
    """The H200 recipe carries no geometry of its own (its verified hash predates the plan), so the
    plan reads it from the GGUF it serves; the pool it predicts is what vLLM reported on the H200."""
    r, out = plan_json("gemma3-270m-h200", "--checkpoint", str(gemma_gguf))
    assert out["kv"]["bytes_per_token"] == 3072  # the 3 full layers; the 15 sliding ones once a sequence
    pool_gib = out["memory"]["pool_bytes"] / 2**30
    assert abs(pool_gib - VLLM_H200_KV_GIB) / VLLM_H200_KV_GIB < 0.10


# The same start's "GPU KV cache size: 8,148,422 tokens" (vllm:cache_config_info kv_cache_max_concurrency
# 795.74 at max_model_len 10,240). vLLM 0.26.0 reserves each sliding layer's 512-token window plus the
# 8,192 tokens in flight (ngram speculation turns async scheduling off) in 16-token blocks, + 1 block:
# 3 x 10,240 x 1,024 + 15 x 545 x 16 x 1,024 bytes a sequence = 16,152 B a token as its log counts.
VLLM_H200_KV_TOKENS = 8_148_422


def test_the_h200_plan_charges_sliding_windows_per_sequence_as_vllm_does(gemma_gguf):
    r, out = plan_json("gemma3-270m-h200", "--checkpoint", str(gemma_gguf))
    assert out["kv"]["vllm_bytes_per_token"] == (3 * 10240 * 1024 + 15 * 545 * 16 * 1024) / 10240 == 16152
    assert out["memory"]["pool_tokens"] == int(out["memory"]["pool_bytes"] // 16152)
    # vLLM's own token count from its own pool: exact; the plan's pool is 1.5% over vLLM's
    assert int(VLLM_H200_KV_GIB * 2**30 / 16152) == pytest.approx(VLLM_H200_KV_TOKENS, rel=1e-4)
    assert abs(out["memory"]["pool_tokens"] - VLLM_H200_KV_TOKENS) / VLLM_H200_KV_TOKENS < 0.05
