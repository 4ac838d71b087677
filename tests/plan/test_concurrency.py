"""The plan's two concurrency figures (src/cookbook/plan/concurrency.py): full-length sequences and the
recipe's typical request, with the batch's in-flight tokens counted once; held against the KV lines
vLLM 0.26.0 wrote in the engine-check bundles on the H200 (recipes/*/evidence/engine-check/*/server.log),
and against the recipes' own max_num_seqs whys."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.plan import concurrency as C
from cookbook.plan.budget import make_plan
from cookbook.recipe.resolve import resolve

GIB = 2**30
ROOT = Path(__file__).resolve().parents[2]
HOPPER = ["dsv4-flash-8x-h200", "dsv4-flash-4x-h200", "dsv4-flash-8x-h100", "glm52-fp8-8x-h200"]
KV_LINES = {
    "available_kv_gib": r"Available KV cache memory: ([\d.]+) GiB",
    "kv_tokens": r"GPU KV cache size: ([\d,]+) tokens",
    "max_concurrency": r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x",
}


# the H200 runs of 2026-12-05 these figures are held against (a later run adds a bundle beside them)
RUNS = {
    "dsv4-flash-8x-h200": "20261205T073443Z",
    "dsv4-flash-4x-h200": "20261205T073444Z",
    "glm52-fp8-8x-h200": "20261205T131850Z",
}


def _bundle(slug: str) -> Path:
    return ROOT / "recipes" / slug / "evidence" / "engine-check" / RUNS[slug]


def _kv_lines(slug: str) -> dict:
    """vLLM's own KV figures, read from the bundle's server.log as vLLM printed them."""
    log = (_bundle(slug) / "server.log").read_text(encoding="utf-8", errors="replace")
    out = {}
    for key, pattern in KV_LINES.items():
        (found,) = re.findall(pattern, log)
        out[key] = float(found.replace(",", ""))
    return out


def _as_run(slug: str):
    """The plan of the block the engine check ran: its own scaled and geometry sets, its max_num_seqs,
    the weights vLLM reported loading."""
    rec = json.loads((_bundle(slug) / "engine-check.json").read_text(encoding="utf-8"))
    sets = rec["scaled_sets"] + rec["geometry_sets"]
    sets += [
        f"max_num_seqs={rec['vllm']['args']['max_num_seqs']}",
        f"model.source.size_gib={rec['vllm']['model_load_gib']}",
    ]
    return make_plan(resolve(slug, sets=sets, check=False), gpus=1), rec


@pytest.mark.parametrize("slug", ["dsv4-flash-8x-h200", "dsv4-flash-4x-h200"])
def test_dsv4_figures_from_vllms_own_pool_match_the_plans(slug):
    """From the pool vLLM logged (its block count), the same layout gives the plan's figures within 1%:
    the plan's pool is vLLM's, so both concurrency figures are too."""
    p, rec = _as_run(slug)
    vllm = _kv_lines(slug)
    blocks = int(rec["cache_config_info"]["num_gpu_blocks"])
    lay = p.kv.layout
    assert round(blocks * lay.block_bytes / GIB, 2) == vllm["available_kv_gib"]  # the log's pool, to its digits
    own = C.decode_in_flight(2, 0)
    for tokens in (p.setup.max_model_len, 1024 + 2048):
        from_vllm = C.at_length(p.kv, blocks * lay.block_bytes, tokens, own).seqs
        from_plan = C.at_length(p.kv, p.pool_bytes, tokens, own).seqs
        assert abs(from_plan - from_vllm) / from_vllm < 0.01, (tokens, from_plan, from_vllm)
    # vLLM's "Maximum concurrency" charges every sequence the window pages of the whole in-flight budget;
    # the full-length figure counts them once for the batch, so it is higher, never lower
    assert p.full_length.seqs > vllm["max_concurrency"] > p.max_seqs_at_ctx


def test_glm_full_length_figure_from_vllms_pool_is_vllms_maximum_concurrency():
    """No sliding window: the full-length figure is the pool over one sequence, so from vLLM's own pool
    it is the integer part of vLLM's "Maximum concurrency"; from the plan's pool it is 10.8% higher, the
    pool's stated reason (test_plan_vs_engine_check.py)."""
    p, _ = _as_run("glm52-fp8-8x-h200")
    vllm = _kv_lines("glm52-fp8-8x-h200")
    vllm_pool = vllm["kv_tokens"] * p.vllm_kv_bytes_per_token  # tokens x 6,564 B: the pool to the byte
    assert round(vllm_pool / GIB, 2) == vllm["available_kv_gib"]
    full = C.at_length(p.kv, vllm_pool, p.setup.max_model_len, 0)
    assert full.seqs == int(vllm["max_concurrency"]) == 63 and full.in_flight_bytes == 0
    assert p.full_length.seqs == 70  # the plan's pool: 56.59 GiB against vLLM's 51.07
    assert p.full_length.seqs / full.seqs == pytest.approx(p.vllm_pool_bytes / vllm_pool, rel=0.02)
    typical = C.at_length(p.kv, vllm_pool, 8000 + 1024, 0).seqs
    assert typical == int(vllm["kv_tokens"] // 9024) == 925


def test_dsv4_batch_budget_is_counted_once_not_per_sequence():
    """Issue 68: the plan charged every DeepSeek-V4 sequence the compressor and window pages of two
    8,192-token batches (10.56 GiB at 1M, 9 on 8x H200). vLLM 0.26 frees out-of-window pages once a
    step is processed, so a running sequence holds its window, and the batch's in-flight pages are one
    reserve: 23 full-length sequences."""
    p = make_plan(resolve("dsv4-flash-8x-h200"))
    full = p.full_length
    assert p.max_seqs_at_ctx == 9  # vLLM's start-up / admission worst case, still reported
    assert full.seqs == 23
    assert full.in_flight_bytes / GIB == pytest.approx(6.44, abs=0.01)
    assert full.held_bytes + full.in_flight_bytes == pytest.approx(p.seq_bytes_at_ctx, rel=0.03)
    lay = p.kv.layout
    assert full.seqs == (lay.blocks(p.pool_bytes) - full.in_flight_bytes // lay.block_bytes) // (
        full.held_bytes // lay.block_bytes
    )


def test_sliding_window_parts_hold_their_window_and_share_the_in_flight_reserve():
    """A gqa model with windows (the byte model, not DeepSeek-V4's layout)."""
    from cookbook.plan.kv import KV, KVPart

    kv = KV(
        parts=[
            KVPart("full", 1000.0, 1),
            KVPart("sliding", 100.0, 1, window=512, block_size=16),
        ],
        in_flight_tokens=8192,
    )
    c = C.at_length(kv, 10**9, 4096, own_in_flight=2)
    # the window: 511 + 2 own tokens -> 33 blocks + 1, of 16 tokens each
    assert c.held_bytes == 1000 * 4096 + 100 * 34 * 16
    assert c.in_flight_bytes == 100 * 8192
    assert c.seqs == int((10**9 - 100 * 8192) // c.held_bytes)
    assert C.at_length(KV(), 10**9, 4096, 2) is None  # no geometry: unknown, never 0


@pytest.mark.parametrize("slug", HOPPER)
def test_each_hopper_recipes_why_states_the_plans_figures(slug):
    """max_num_seqs is chosen for the typical request and below what the pool runs of it; its why gives
    the plan's typical and full-length figures and the --set for no preemption at full context."""
    r = resolve(slug)
    p = make_plan(r)
    setting = r.recipe.serve.args["max_num_seqs"]
    assert p.fits and p.traffic is not None and p.typical is not None
    assert setting.value <= p.typical.seqs
    why = " ".join(setting.why.split())
    (typical,) = re.findall(r"runs ([\d,]+) such requests", why)
    assert int(typical.replace(",", "")) == p.typical.seqs
    (no_preemption,) = re.findall(r"--set serve\.args\.max_num_seqs=(\d+)", why)
    assert int(no_preemption) == p.full_length.seqs < setting.value
    assert "preempts" in why
    traffic = r.recipe.plan.traffic
    assert traffic.source and traffic.why and traffic.concurrency <= setting.value


def test_plan_prints_both_figures_and_json_carries_them():
    res = CliRunner().invoke(main, ["plan", "glm52-fp8-8x-h200"])
    assert res.exit_code == 0, res.output
    assert "full length, 131,072 tokens: 4 (6.68 GiB each)" in res.output
    assert "typical request, 8,000 + 1,024 tokens: 72" in res.output
    res = CliRunner().invoke(main, ["plan", "dsv4-flash-8x-h200", "--json"])
    conc = json.loads(res.output)["concurrency"]
    assert conc["full_length"]["seqs"] == 23 and conc["typical"]["tokens"] == 3072
    assert conc["traffic"]["concurrency"] == 128 and conc["in_flight_tokens"] == 16384


def test_typical_request_is_capped_at_max_model_len():
    res = CliRunner().invoke(main, ["plan", "glm52-fp8-8x-h200", "--ctx", "4096", "--json"])
    conc = json.loads(res.output)["concurrency"]
    assert conc["typical"]["tokens"] == 4096
    text = CliRunner().invoke(main, ["plan", "glm52-fp8-8x-h200", "--ctx", "4096"]).output
    assert "(capped at max_model_len)" in text


def test_a_recipe_without_traffic_says_so():
    res = CliRunner().invoke(main, ["plan", "glm52-2"])
    assert "typical request: the recipe states none (plan.traffic)" in res.output


@pytest.mark.parametrize(
    "item",
    [
        "plan.traffic.prompt_tokens=0",
        "plan.traffic.prompt_tokens=-8000",
        "plan.traffic.output_tokens=abc",
        "plan.traffic.output_tokens=4294967296",
        "plan.traffic.concurrency=0",
        "plan.traffic.why=",
        "plan.traffic.rate=3",
    ],
)
def test_hostile_traffic_values_are_refused_with_one_message(item):
    res = CliRunner().invoke(main, ["plan", "glm52-fp8-8x-h200", "--set", item])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "plan.traffic" in res.output


def test_largest_context_at_max_num_seqs_counts_the_batch_budget_once():
    """With max_num_seqs 512 the old arithmetic (every sequence charged the whole in-flight budget)
    said 480 tokens; 512 sequences of 41,472 tokens run at once in the 8x H200 pool."""
    p = make_plan(resolve("dsv4-flash-8x-h200"))
    assert p.max_ctx_at_seqs == 41_472
    assert C.at_length(p.kv, p.pool_bytes, p.max_ctx_at_seqs, 2).seqs >= 512
    assert C.at_length(p.kv, p.pool_bytes, p.max_ctx_at_seqs + 256, 2).seqs < 512
    # without windows nothing changes: GLM-5.2 on 2 MI300X, 32 sequences
    assert make_plan(resolve("glm52-2")).max_ctx_at_seqs == 34_522
