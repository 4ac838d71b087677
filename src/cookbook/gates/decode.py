"""decode: single-stream decode rate, counted from the server's non-streamed `usage`.

Under speculative decoding (MTP, DSpark) vLLM puts several accepted tokens into one SSE delta,
so a rate counted from streamed chunks undercounts by about the acceptance factor (the GLM-5.2
NVFP4 document: "Measure spec decode with non-streamed responses"). At each context length the
gate sends an uncached prompt once with max_tokens 1 (its prefill fills the prefix cache), then
times a non-streamed greedy completion of `max_tokens` tokens (ignore_eos) on the same prompt, so
the time is decode, not prefill. The same request is then streamed once: its chunk count and its
final usage are recorded, and the streamed usage must equal the non-streamed count. Where the gate
sets min_prefill_tok_s, the first request's time judges the fresh prefill: prompt tokens / its
client time (a fresh prefill and one token); with min_prefix_cache_speedup the same prompt is sent
again at once (max_tokens 1, now prefix-cached), and the cold time over the warm one is judged.
"""

from __future__ import annotations

import random

from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, need, ok_body, stream_of
from cookbook.recipe.gates_spec.decode import DecodeGate

FORMULAS = {
    "tok_s": "per context length: usage.completion_tokens / elapsed of the non-streamed request (client "
    "time, the prompt already in the prefix cache)",
    "stream_chunks": "token-carrying SSE chunks of the same request streamed; tokens per chunk above 1 "
    "is what chunk counting would miss",
    "prefill_tok_s": "per context length judged by min_prefill_tok_s: context tokens / elapsed of the first, "
    "uncached request (max_tokens 1: a fresh prefill and one token)",
    "prefix_cache_speedup": "per context length judged by min_prefix_cache_speedup: elapsed of the first, "
    "uncached request / elapsed of the same prompt sent again at once (max_tokens 1, prefix-cached)",
}


def _body(ids: list[int], max_tokens: int) -> dict:
    return {"prompt": ids, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True}


def item_of(n: int, body: dict, elapsed_s: float, stream) -> dict:
    tokens = (body.get("usage") or {}).get("completion_tokens")
    chunks = len(stream.token_times())
    return {
        "context_tokens": n,
        "tokens": tokens,
        "elapsed_s": round(elapsed_s, 4),
        "tok_s": round(tokens / elapsed_s, 2) if isinstance(tokens, int) and elapsed_s > 0 else None,
        "stream_tokens": stream.completion_tokens,
        "stream_chunks": chunks,
        "tokens_per_chunk": round(stream.completion_tokens / chunks, 3)
        if chunks and stream.completion_tokens
        else None,
    }


def measure(items: list[dict], prefill: dict[str, float] | None = None, warm: dict[str, float] | None = None) -> dict:
    out = {
        "tok_s": {str(i["context_tokens"]): i["tok_s"] for i in items},
        "tokens_per_chunk": {str(i["context_tokens"]): i["tokens_per_chunk"] for i in items},
    }
    # only where the gate judges them: bundles recorded before these bars keep their figures
    if prefill:
        out["prefill_tok_s"] = prefill
    if warm:
        out["prefix_cache_speedup"] = warm
    return out


def speedup(cold_s: float, warm_s: float) -> float | None:
    return round(cold_s / warm_s, 2) if warm_s > 0 else None


def prefill_rate(n: int, elapsed_s: float) -> float | None:
    return round(n / elapsed_s, 1) if elapsed_s > 0 else None


def verdict(measured: dict, items: list[dict], cfg: DecodeGate) -> list[tuple[bool, str]]:
    tok_s = measured.get("tok_s") or {}
    checks = [
        (
            sorted(tok_s) == sorted(str(n) for n in cfg.contexts_tokens),
            f"decode measured at {sorted(tok_s)} tokens of context, the gate asks {cfg.contexts_tokens}",
        )
    ]
    for i in items:
        n = i.get("context_tokens")
        checks.append(
            (
                i.get("tokens") == cfg.max_tokens,
                f"at {n}: the non-streamed usage counts {i.get('tokens')} tokens, asked {cfg.max_tokens} (ignore_eos)",
            )
        )
        checks.append(
            (
                i.get("stream_tokens") == i.get("tokens"),
                f"at {n}: the streamed usage counts {i.get('stream_tokens')} tokens, the same request non-streamed "
                f"{i.get('tokens')}: the server's streamed counts are wrong (chunk counting undercounts under speculation)",
            )
        )
    for n, limit in cfg.min_tok_s or []:
        v = tok_s.get(str(n))
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= limit
        checks.append((ok, f"decode at {n} tokens of context {v} tok/s < {limit}"))
    prefill = measured.get("prefill_tok_s") or {}
    for n, limit in cfg.min_prefill_tok_s or []:
        v = prefill.get(str(n))
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= limit
        checks.append((ok, f"fresh prefill of {n} tokens {v} tok/s < {limit}"))
    warm = measured.get("prefix_cache_speedup") or {}
    for n, limit in cfg.min_prefix_cache_speedup or []:
        v = warm.get(str(n))
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= limit
        checks.append((ok, f"prefix cache at {n} tokens: the warm request {v}x faster than the cold one < {limit}x"))
    return checks


async def run(ctx: Context, cfg: DecodeGate) -> None:
    r = ctx.result
    r.formulas = FORMULAS
    r.thresholds = {"min_tok_s": {str(k): v for k, v in (cfg.min_tok_s or [])}, "max_tokens": cfg.max_tokens}
    rng = random.Random(cfg.seed)
    for n in cfg.contexts_tokens:
        ctx.check_fits(n, cfg.max_tokens, f"decode at {n} tokens")
    items, prefill, warm = [], {}, {}
    judged = {n for n, _ in cfg.min_prefill_tok_s or []}
    cached = {n for n, _ in cfg.min_prefix_cache_speedup or []}
    for n in cfg.contexts_tokens:
        ids = await ctx.uncached_prompt_ids(n, rng)
        await ctx.server.post("/v1/completions", _body(ids, 1), tag=f"ctx{n}/prefill")
        cold = ctx.server.last_elapsed_s
        if n in judged:
            prefill[str(n)] = prefill_rate(n, cold)
        if n in cached:
            await ctx.server.post("/v1/completions", _body(ids, 1), tag=f"ctx{n}/warm")
            warm[str(n)] = speedup(cold, ctx.server.last_elapsed_s)
        body = await ctx.server.post("/v1/completions", _body(ids, cfg.max_tokens), tag=f"ctx{n}/timed")
        elapsed = ctx.server.last_elapsed_s  # as the transcript records it, so recompute agrees
        stream = await ctx.server.stream("/v1/completions", _body(ids, cfg.max_tokens), tag=f"ctx{n}/stream")
        item = item_of(n, body, elapsed, stream)
        items.append(item)
        r.items.append(item)
    r.measured = measure(items, prefill, warm)
    r.judge(verdict(r.measured, items, cfg))


def recompute(recorded: RecordedRun, cfg: DecodeGate) -> tuple[dict, list[dict]]:
    recs = recorded.requests("decode")
    items, prefill, warm = [], {}, {}

    def one_token(tag: str, n: int) -> dict:
        rec = need(recs, tag)
        req = rec["request"]
        if len(req.get("prompt") or []) != n or req.get("max_tokens") != 1:
            raise ValueError(f"request {tag!r} is not a {n}-token prompt with max_tokens 1")
        ok_body(rec)
        return rec

    for n, _ in cfg.min_prefill_tok_s or []:
        prefill[str(n)] = prefill_rate(n, float(one_token(f"ctx{n}/prefill", n).get("elapsed_s") or 0.0))
    for n, _ in cfg.min_prefix_cache_speedup or []:
        cold, hot = one_token(f"ctx{n}/prefill", n), one_token(f"ctx{n}/warm", n)
        if cold["request"]["prompt"] != hot["request"]["prompt"]:
            raise ValueError(f"ctx{n}: the cold and the warm requests carry different prompts")
        warm[str(n)] = speedup(float(cold.get("elapsed_s") or 0.0), float(hot.get("elapsed_s") or 0.0))
    for n in cfg.contexts_tokens:
        timed, streamed = need(recs, f"ctx{n}/timed"), need(recs, f"ctx{n}/stream")
        for rec in (timed, streamed):
            req = rec["request"]
            if len(req.get("prompt") or []) != n or req.get("max_tokens") != cfg.max_tokens:
                raise ValueError(f"request {rec['tag']!r} is not a {n}-token prompt with max_tokens {cfg.max_tokens}")
        if timed["request"]["prompt"] != streamed["request"]["prompt"]:
            raise ValueError(f"ctx{n}: the timed and the streamed requests carry different prompts")
        items.append(item_of(n, ok_body(timed), float(timed.get("elapsed_s") or 0.0), stream_of(streamed)))
    return measure(items, prefill, warm), items
