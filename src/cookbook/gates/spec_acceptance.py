"""spec_acceptance: draft acceptance from /metrics counter deltas over natural-text requests.

Every request carries the sampling the recipe declares (`temperature`, default 0: greedy; the
Gaudi document measured its MTP acceptance at the server's default, 0.8), the bundle records it
under measured.sampling, and the re-check refuses transcripts sent at any other.

Prompts are natural text (random-token prompts understate acceptance): GSM8K questions
from the data path, or the writing tasks that ship with the cookbook (`prompts:`). Gates
run one at a time, so the deltas belong to this gate's requests.
"""

from __future__ import annotations

from cookbook.gates import data as gate_data
from cookbook.gates import metrics
from cookbook.gates.client import bounded_gather
from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, need, ok_body
from cookbook.gates.result import GateFailure
from cookbook.recipe.gates_spec.spec_acceptance import SpecAcceptanceGate

# The /metrics snapshots around the gate's requests, saved in the bundle (recompute reads them).
METRICS_BEFORE, METRICS_AFTER = "spec_acceptance.metrics-before.prom", "spec_acceptance.metrics-after.prom"


def rounded(stats: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in stats.items()}


def judge_stats(stats: dict, cfg: SpecAcceptanceGate) -> list[tuple[bool, str]]:
    if not all(isinstance(stats.get(k), (int, float)) for k in ("acceptance_rate", "mean_acceptance_length")):
        return [(False, "acceptance_rate / mean_acceptance_length are not numbers")]
    return [
        (
            stats["acceptance_rate"] >= cfg.min_acceptance_rate,
            f"acceptance_rate {stats['acceptance_rate']:.3f} < {cfg.min_acceptance_rate}",
        ),
        (
            stats["mean_acceptance_length"] >= cfg.min_mean_acceptance_length,
            f"mean_acceptance_length {stats['mean_acceptance_length']:.3f} < {cfg.min_mean_acceptance_length}",
        ),
    ]


def sampling(cfg: SpecAcceptanceGate) -> dict:
    """The sampling fields every request of the gate carries (the recipe's, recorded in the bundle)."""
    temperature = cfg.temperature if cfg.temperature is not None else 0.0
    return {"temperature": temperature, **({"top_p": cfg.top_p} if cfg.top_p is not None else {})}


def verdict(measured: dict, items: list[dict], cfg: SpecAcceptanceGate) -> list[tuple[bool, str]]:
    """The gate's checks as a pure function of what was measured (run() and `gates verify` call it)."""
    return judge_stats(measured, cfg)


async def run(ctx: Context, cfg: SpecAcceptanceGate) -> None:
    r = ctx.result
    r.formulas = metrics.SPEC_FORMULAS
    r.thresholds = {
        "min_acceptance_rate": cfg.min_acceptance_rate,
        "min_mean_acceptance_length": cfg.min_mean_acceptance_length,
    }
    if cfg.prompts in (None, "gsm8k"):
        prompts = [
            f"Question: {p['question']}\nExplain step by step." for p in gate_data.gsm8k(ctx.data, "test", cfg.requests)
        ]
    else:
        from cookbook.gates import gatedata

        prompts = gate_data.builtin_prompts(cfg.prompts, cfg.requests)
        r.measured = {"builtin_sha256": {cfg.prompts: gatedata.digest(cfg.prompts)}}
    before = await ctx.server.get_text("/metrics")

    async def one(i, p):
        body = await ctx.server.post(
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": p}],
                **sampling(cfg),
                "max_tokens": cfg.max_tokens,
                "seed": cfg.seed,
            },
            tag=f"q{i}",
        )
        n = (body.get("usage") or {}).get("completion_tokens")
        r.items.append({"index": i, "completion_tokens": n})
        return n or 0

    tokens = await bounded_gather(cfg.max_concurrent_requests, [one(i, p) for i, p in enumerate(prompts)])
    after = await ctx.server.get_text("/metrics")
    (ctx.out_dir / METRICS_BEFORE).write_text(before)
    (ctx.out_dir / METRICS_AFTER).write_text(after)
    try:
        stats = metrics.spec_decode_stats(before, after)
    except ValueError as e:
        raise GateFailure(str(e)) from e
    r.measured = {**rounded(stats), **r.measured}
    r.measured["completion_tokens"] = sum(tokens)
    r.measured["prompts"] = cfg.prompts or "gsm8k"
    r.measured["sampling"] = sampling(cfg)
    r.judge(verdict(r.measured, r.items, cfg))


def recompute(recorded: RecordedRun, cfg: SpecAcceptanceGate) -> tuple[dict, None]:
    """The acceptance figures again from the saved /metrics snapshots, and the completion tokens
    from the transcript's usage counts (`gates verify` calls it)."""
    stats = metrics.spec_decode_stats(recorded.metrics(METRICS_BEFORE), recorded.metrics(METRICS_AFTER))
    recs = recorded.requests("spec_acceptance")
    want = sampling(cfg)
    for i in range(cfg.requests):
        sent = need(recs, f"q{i}").get("request") or {}
        got = {k: sent.get(k) for k in want} | {k: sent[k] for k in ("top_p",) if k in sent and k not in want}
        if got != want:
            raise ValueError(f"request q{i} was sent with {got}; the recipe declares {want}")
    tokens = sum(
        (ok_body(need(recs, f"q{i}")).get("usage") or {}).get("completion_tokens") or 0 for i in range(cfg.requests)
    )
    return {**rounded(stats), "completion_tokens": tokens}, None
