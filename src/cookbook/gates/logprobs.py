"""logprobs: sampled requests; every token has top_logprobs K entries, all finite and unclamped."""

from __future__ import annotations

import math

from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, need, ok_body
from cookbook.recipe.gates_spec.logprobs import LogprobsGate

FORMULAS = {
    "bad_tokens": "generated tokens whose logprob or any of its top-K is missing, non-finite, > 0, "
    "<= clamp_sentinel, or whose top-K count != K, or whose alternatives after the sampled token "
    "are not sorted descending, or where the sampled token's two logprobs disagree",
    "tokens_checked": "sum over requests of len(choices[0].logprobs.content)",
}
_EPS = 1e-4


def _bad_value(v, sentinel: float) -> str | None:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return f"not a number ({v!r})"
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "infinite"
    if v <= sentinel:
        return f"clamped ({v})"
    if v > _EPS:
        return f"positive ({v})"
    return None


def check_token(entry: dict, k: int, sentinel: float) -> list[str]:
    """Problems with one logprobs.content entry (empty list means it is sound)."""
    problems = []
    bad = _bad_value(entry.get("logprob"), sentinel)
    if bad:
        problems.append(f"logprob {bad}")
    top = entry.get("top_logprobs")
    if not isinstance(top, list) or len(top) != k:
        problems.append(f"top_logprobs has {len(top) if isinstance(top, list) else 'no'} entries, expected {k}")
        return problems
    for t in top:
        bad = _bad_value(t.get("logprob"), sentinel)
        if bad:
            problems.append(f"top logprob {bad}")
    if problems:
        return problems
    # vLLM lists the sampled token first, then the most likely ones in order.
    rest = top[1:] if top[0].get("token") == entry.get("token") else top
    values = [t["logprob"] for t in rest]
    if any(a < b - _EPS for a, b in zip(values, values[1:])):
        problems.append("top_logprobs (after the sampled token) not sorted descending")
    same = [t["logprob"] for t in top if t.get("token") == entry.get("token")]
    if same and abs(same[0] - entry["logprob"]) > _EPS:
        problems.append(f"sampled token's logprob {entry['logprob']} != its top_logprobs entry {same[0]}")
    if values and entry["logprob"] > values[0] + _EPS and top[0].get("token") == entry.get("token") and len(rest) == k:
        problems.append("sampled token more likely than the listed most likely token")
    return problems


def score_response(body: dict, k: int, sentinel: float) -> dict:
    choice = body["choices"][0]
    content = (choice.get("logprobs") or {}).get("content") or []
    usage_n = (body.get("usage") or {}).get("completion_tokens")
    problems = []
    if not content:
        problems.append("no logprobs returned")
    if usage_n is not None and usage_n != len(content):
        problems.append(f"{len(content)} logprob entries for {usage_n} completion tokens")
    bad_tokens = 0
    for i, entry in enumerate(content):
        p = check_token(entry, k, sentinel)
        if p:
            bad_tokens += 1
            problems.append(f"token {i} ({entry.get('token')!r}): " + ", ".join(p))
    return {"tokens": len(content), "bad_tokens": bad_tokens, "problems": problems[:20], "ok": not problems}


def measure(scores: list[dict]) -> dict:
    """The gate's figures from every request's score_response()."""
    return {
        "tokens_checked": sum(s["tokens"] for s in scores),
        "bad_tokens": sum(s["bad_tokens"] for s in scores),
        "requests_ok": sum(s["ok"] for s in scores),
        "requests": len(scores),
    }


def verdict(measured: dict, items: list[dict], cfg: LogprobsGate) -> list[tuple[bool, str]]:
    """The gate's checks as a pure function of what was measured (run() and `gates verify` call it)."""
    n, ok, bad = measured.get("requests"), measured.get("requests_ok"), measured.get("bad_tokens")
    return [
        (n == cfg.requests, f"{n} requests measured, the gate sends {cfg.requests}"),
        (
            ok == n and bad == 0 and (measured.get("tokens_checked") or 0) > 0,
            f"{ok} of {n} requests sound, {bad} bad tokens: "
            + "; ".join(f"request {s.get('request')}: {p}" for s in items for p in (s.get("problems") or [])[:3]),
        ),
    ]


async def run(ctx: Context, cfg: LogprobsGate) -> None:
    r = ctx.result
    r.formulas = FORMULAS
    r.thresholds = {"bad_tokens": 0, "top_logprobs": cfg.top_logprobs, "clamp_sentinel": cfg.clamp_sentinel}
    prompts = [
        "Tell me a short story about a lighthouse keeper.",
        "Name some colours and describe them.",
        "What do cats dream about?",
        "Describe the sea at night.",
    ]
    from cookbook.gates.client import bounded_gather

    async def one(i):
        body = await ctx.server.post(
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": prompts[i % len(prompts)]}],
                "temperature": cfg.temperature,
                "max_tokens": cfg.max_tokens,
                "seed": cfg.seed + i,
                "logprobs": True,
                "top_logprobs": cfg.top_logprobs,
            },
            tag=f"request{i}",
        )
        s = score_response(body, cfg.top_logprobs, cfg.clamp_sentinel)
        r.items.append({"request": i, **s})
        return s

    scores = await bounded_gather(cfg.max_concurrent_requests, [one(i) for i in range(cfg.requests)])
    r.measured = measure(scores)
    r.judge(verdict(r.measured, r.items, cfg))


def recompute(recorded: RecordedRun, cfg: LogprobsGate) -> tuple[dict, list[dict]]:
    """The measured figures again from the bundle's transcript (`gates verify` calls it)."""
    recs = recorded.requests("logprobs")
    items = []
    for i in range(cfg.requests):
        rec = need(recs, f"request{i}")
        if rec["request"].get("top_logprobs") != cfg.top_logprobs or not rec["request"].get("logprobs"):
            raise ValueError(f"request{i} did not ask for {cfg.top_logprobs} top logprobs")
        items.append({"request": i, **score_response(ok_body(rec), cfg.top_logprobs, cfg.clamp_sentinel)})
    return measure(items), items
