"""stress: decodes keep flowing while long prompts prefill.

`decodes` streaming requests start; once each has produced tokens, the long prompts are
sent. The largest gap between token-carrying chunks (usage.completion_tokens rising) of
any decode is the figure; under speculation chunks are bursty, so the gap is per chunk,
not per token.
"""

from __future__ import annotations

import asyncio
import random
import time

from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, end_time, need, ok_body, sent_time, stream_of
from cookbook.recipe.gates_spec.stress import StressGate

FORMULAS = {
    "max_decode_gap_s": "max over decodes of the largest difference between arrival times of consecutive "
    "chunks whose usage.completion_tokens increased (first token excluded)",
    "decode_tokens": "final usage.completion_tokens of each decode (must equal decode_max_tokens)",
}


NEEDLE_ANSWER_TOKENS = 96


async def _with_needles(ctx: Context, ids: list[int], pairs: list[tuple[str, str]]) -> list[int]:
    """The long prompt with the needle sentences spread through it (at 1/(k+1), 2/(k+1), ... of its
    length) and a question after it; as long as before, less what the needles and question take."""
    from cookbook.gates.needles import needle_sentence, question

    inserts = [await ctx.server.tokenize(prompt=f" {needle_sentence(k, c)} ") for k, c in pairs]
    ask = await ctx.server.tokenize(prompt=f"\n\n{question([k for k, _ in pairs])}\nAnswer:")
    body = ids[: max(1, len(ids) - sum(map(len, inserts)) - len(ask))]
    out, last = [], 0
    for i, ins in enumerate(inserts, 1):
        cut = len(body) * i // (len(inserts) + 1)
        out += body[last:cut] + ins
        last = cut
    return out + body[last:] + ask


def decode_gaps(token_times: list[tuple[float, int]]) -> list[float]:
    """Gaps between consecutive token-carrying chunks, from (arrival time, tokens) pairs."""
    times = [t for t, n in token_times if n > 0]
    return [b - a for a, b in zip(times, times[1:])]


def max_gap_s(gaps: list[float]) -> float:
    """The largest decode gap, rounded; infinite when no decode produced two token chunks."""
    return round(max(gaps), 4) if gaps else float("inf")


def prefill_needles(cfg: StressGate, j: int) -> list[tuple[str, str]]:
    """(key, code) pairs hidden in long prompt j, drawn from the gate's seed (recompute draws them again)."""
    from cookbook.gates.needles import KEYS

    rng = random.Random(f"{cfg.seed}/prefill{j}")
    return [(k, str(rng.randrange(1_000_000, 10_000_000))) for k in rng.sample(KEYS, cfg.needles)]


def needles_item(j: int, pairs: list[tuple[str, str]], text) -> dict:
    codes = [c for _, c in pairs]
    found = [c for c in codes if c in (text if isinstance(text, str) else "")]
    return {"prefill": j, "codes": codes, "found_count": len(found)}


def verdict(measured: dict, items: list[dict], cfg: StressGate) -> list[tuple[bool, str]]:
    """The gate's checks as a pure function of what was measured (run() and `gates verify` call it)."""
    decodes = [i for i in items if "decode" in i]
    prefills = [i for i in items if "prefill" in i]
    problems = [
        f"decode {i['decode']} produced {i.get('tokens')} tokens, expected {cfg.decode_max_tokens}"
        for i in decodes
        if i.get("tokens") != cfg.decode_max_tokens
    ]
    max_gap = measured.get("max_decode_gap_s")
    gap_ok = isinstance(max_gap, (int, float)) and not isinstance(max_gap, bool) and max_gap <= cfg.max_decode_gap_s
    missed = [
        f"prefill {i.get('prefill')}: {i.get('found_count')}/{len(i.get('codes') or [])} codes found"
        for i in prefills
        if cfg.needles and (i.get("found_count") != cfg.needles or len(i.get("codes") or []) != cfg.needles)
    ]
    return [
        (not missed, "needles missed in the long prompts: " + "; ".join(missed)),
        (
            len(decodes) == cfg.decodes and len(prefills) == len(cfg.prefill_tokens),
            f"{len(decodes)} decodes and {len(prefills)} prefills measured, the gate runs "
            f"{cfg.decodes} and {len(cfg.prefill_tokens)}",
        ),
        (gap_ok, f"max_decode_gap_s {max_gap} > {cfg.max_decode_gap_s}"),
        (not problems, "; ".join(problems)),
        (
            measured.get("prefill_overlapped_decodes") is True,
            "decodes finished before the long prompts were sent (raise decode_max_tokens)",
        ),
    ]


def _retrieved(fut: asyncio.Future) -> None:
    """Mark a background future's outcome as seen. Left unread, a cancelled gather or a decode that
    failed after the gate had moved on is logged by asyncio at exit ("... exception was never
    retrieved ... CancelledError"), a traceback after every run."""
    if not fut.cancelled():
        fut.exception()


async def run(ctx: Context, cfg: StressGate) -> None:
    r = ctx.result
    r.formulas = FORMULAS
    r.thresholds = {"max_decode_gap_s": cfg.max_decode_gap_s, "decode_tokens": cfg.decode_max_tokens}
    rng = random.Random(cfg.seed)
    for n in cfg.prefill_tokens:
        ctx.check_fits(n, 1, f"stress prefill {n}")
    prompts = [await ctx.uncached_prompt_ids(n, rng) for n in cfg.prefill_tokens]
    if cfg.needles:
        prompts = [await _with_needles(ctx, ids, prefill_needles(cfg, j)) for j, ids in enumerate(prompts)]
    flowing = [asyncio.Event() for _ in range(cfg.decodes)]

    def watch(i):
        def on_chunk(_t, chunk):
            if ((chunk.get("usage") or {}).get("completion_tokens") or 0) >= 2:
                flowing[i].set()

        return on_chunk

    t0 = time.perf_counter()
    decodes = [
        asyncio.ensure_future(
            ctx.server.stream(
                "/v1/completions",
                {
                    "prompt": f"Story {i}: Once upon a time",
                    "max_tokens": cfg.decode_max_tokens,
                    "temperature": 0.0,
                    "ignore_eos": True,
                },
                tag=f"decode{i}",
                on_chunk=watch(i),
            )
        )
        for i in range(cfg.decodes)
    ]
    try:
        # Send the long prompts once every decode is streaming (or one has already ended).
        waits = [asyncio.ensure_future(e.wait()) for e in flowing]
        all_flowing = asyncio.ensure_future(asyncio.gather(*waits))
        all_flowing.add_done_callback(_retrieved)
        await asyncio.wait([all_flowing, *decodes], return_when=asyncio.FIRST_COMPLETED)
        all_flowing.cancel()  # cancels the waits with it
        for d in decodes:
            if d.done() and d.exception():
                raise d.exception()
        prefill_start = time.perf_counter() - t0

        async def prefill(j, ids):
            s = time.perf_counter()
            body = await ctx.server.post(
                "/v1/completions",
                {"prompt": ids, "max_tokens": NEEDLE_ANSWER_TOKENS if cfg.needles else 1, "temperature": 0.0},
                tag=f"prefill{j}",
            )
            found = {}
            if cfg.needles:
                found = needles_item(j, prefill_needles(cfg, j), body["choices"][0].get("text"))
            return {
                **found,
                "prefill": j,
                "prompt_tokens": (body.get("usage") or {}).get("prompt_tokens"),
                "latency_s": round(time.perf_counter() - s, 3),
            }

        prefills = await asyncio.gather(*(prefill(j, ids) for j, ids in enumerate(prompts)))
        streams = await asyncio.gather(*decodes)
    finally:
        for d in decodes:  # on a timeout or fault, no decode may stream on into the next gate
            d.cancel()
            d.add_done_callback(_retrieved)
    gaps_all = []
    for i, s in enumerate(streams):
        gaps = decode_gaps(s.token_times())
        gaps_all += gaps
        n = s.completion_tokens
        r.items.append(
            {
                "decode": i,
                "tokens": n,
                "chunks": len(s.chunks),
                "max_gap_s": round(max(gaps), 4) if gaps else None,
                "done_s": round(s.done_s, 3),
            }
        )
    r.items += prefills
    overlapped = any(s.done_s > prefill_start for s in streams)
    r.measured = {
        "max_decode_gap_s": max_gap_s(gaps_all),
        "prefill_sent_at_s": round(prefill_start, 3),
        "prefill_overlapped_decodes": overlapped,
        "prefill_latency_s": [p["latency_s"] for p in prefills],
    }
    r.judge(verdict(r.measured, r.items, cfg))


def recompute(recorded: RecordedRun, cfg: StressGate) -> tuple[dict, list[dict]]:
    """The gaps again from the streamed chunks' times, and the overlap from the records' send and
    end times (`gates verify` calls it)."""
    recs = recorded.requests("stress")
    items, gaps_all, ends = [], [], []
    for i in range(cfg.decodes):
        rec = need(recs, f"decode{i}")
        s = stream_of(rec)
        gaps_all += decode_gaps(s.token_times())
        ends.append(end_time(rec))
        items.append({"decode": i, "tokens": s.completion_tokens})
    sent = []
    for j in range(len(cfg.prefill_tokens)):
        rec = need(recs, f"prefill{j}")
        ok_body(rec)
        sent.append(sent_time(rec))
        if cfg.needles:
            items.append(needles_item(j, prefill_needles(cfg, j), ok_body(rec)["choices"][0].get("text")))
        else:
            items.append({"prefill": j})
    return {
        "max_decode_gap_s": max_gap_s(gaps_all),
        "prefill_overlapped_decodes": bool(sent) and any(e > min(sent) for e in ends),
    }, items
