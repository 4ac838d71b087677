"""speed: decode tok/s at 1 and 4 streams, TTFT of uncached long prompts, a concurrency sweep.

Token counts come from server usage, never from chunk counts. Prompts for TTFT start
with a random prefix, so the prefix cache cannot serve them; the prefix-cache hit delta
from /metrics is recorded as proof.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from cookbook.files import atomic_file
from cookbook.gates import metrics
from cookbook.gates.client import Stream, bounded_gather
from cookbook.gates.context import Context
from cookbook.recipe.gates_spec import SpeedGate

FORMULAS = {
    "decode_tok_s": "(n - n_first) / (t_last - t_first) per stream: n = final usage.completion_tokens, "
    "n_first = tokens in the first token-carrying chunk, t = chunk arrival times",
    "decode_tok_s_4_streams": "sum of decode_tok_s over 4 concurrent streams",
    "ttft_s": "client time from sending the request to the first chunk whose usage.completion_tokens > 0",
    "sweep_aggregate_tok_s": "sum of usage.completion_tokens over the level's requests / (last response - first send)",
    "prefix_cache_hits_during_ttft": "Δ vllm:prefix_cache_hits over the TTFT requests (should be ~0)",
}
DECODE_PROMPT = "Write a long story about a ship and its crew crossing the ocean."


def decode_rate(token_times: list[tuple[float, int]]) -> float | None:
    """Decode tokens/s after the first token-carrying chunk; None with fewer than two such chunks."""
    if len(token_times) < 2:
        return None
    (t_first, n_first), t_last = token_times[0], token_times[-1][0]
    n = sum(k for _, k in token_times)
    return (n - n_first) / (t_last - t_first) if t_last > t_first else None


def sweep_aggregate(tokens: list[int], t_first_send: float, t_last_done: float) -> float:
    """Total completion tokens / drain time of one sweep level."""
    return sum(tokens) / (t_last_done - t_first_send)


async def _decode(ctx: Context, cfg: SpeedGate, tag: str) -> Stream:
    return await ctx.server.stream(
        "/v1/completions",
        {"prompt": DECODE_PROMPT, "max_tokens": cfg.decode_max_tokens, "temperature": 0.0, "ignore_eos": True},
        tag=tag,
    )


PLOTS_HELP = "install the plots extra: .venv/bin/pip install -e '.[plots]'"


def plot(rows: list[dict], path: Path) -> str | None:
    """Draw the sweep to `path` (PNG); None, or why no plot was drawn (matplotlib is the plots extra)."""
    try:
        import matplotlib
    except ImportError:
        return f"no plot: matplotlib is not installed ({PLOTS_HELP})"

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [row["concurrency"] for row in rows]
    ax.plot(xs, [row["aggregate_tok_s"] for row in rows], marker="o")
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("aggregate output tok/s (total tokens / drain time)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.grid(True, alpha=0.3)
    ax.set_title("Concurrency sweep")
    fig.tight_layout()
    with atomic_file(path, overwrite=True) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return None


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def verdict(measured: dict, items: list[dict], cfg: SpeedGate) -> list[tuple[bool, str]]:
    """The gate's checks as a pure function of what was measured (run() and `gates verify` call it)."""
    checks = []
    dt = measured.get("decode_tokens") or {}
    four = dt.get("4_streams") or []
    checks.append(("1_stream" in dt and len(four) == 4, "decode token counts (decode_tokens) not recorded"))
    for what, n in [("1-stream decode", dt.get("1_stream"))] + [("4-stream decode", n) for n in four]:
        checks.append(
            (n == cfg.decode_max_tokens, f"{what}: {n} tokens, expected {cfg.decode_max_tokens} (ignore_eos)")
        )
    rate1, rate4 = measured.get("decode_tok_s_1_stream"), measured.get("decode_tok_s_4_streams")
    if cfg.min_decode_tok_s_1_stream is not None:
        checks.append(
            (
                _num(rate1) and rate1 >= cfg.min_decode_tok_s_1_stream,
                f"decode_tok_s_1_stream {rate1} < {cfg.min_decode_tok_s_1_stream}",
            )
        )
    if cfg.min_decode_tok_s_4_streams is not None:
        checks.append(
            (
                _num(rate4) and rate4 >= cfg.min_decode_tok_s_4_streams,
                f"decode_tok_s_4_streams {rate4} < {cfg.min_decode_tok_s_4_streams}",
            )
        )
    ttft = measured.get("ttft_s") or {}
    checks.append(
        (
            sorted(ttft) == sorted(str(n) for n in cfg.ttft_prompts_tokens),
            f"TTFT measured for {sorted(ttft)} tokens, the gate asks {cfg.ttft_prompts_tokens}",
        )
    )
    hits = measured.get("prefix_cache_hits_during_ttft")
    checks.append((not hits, f"the prefix cache served {hits} tokens of the TTFT prompts, so TTFT is flattered"))
    for limit, n in ((cfg.max_ttft_2k_s, 2048), (cfg.max_ttft_8k_s, 8192)):
        if limit is not None:
            v = ttft.get(str(n))
            checks.append((_num(v) and v <= limit, f"ttft {n} tokens {v} s > {limit} s"))
    rows = measured.get("sweep") or []
    checks.append(
        (
            [row.get("concurrency") for row in rows] == list(cfg.sweep_concurrencies),
            f"sweep measured at {[row.get('concurrency') for row in rows]}, the gate asks {cfg.sweep_concurrencies}",
        )
    )
    for row in rows:
        c, want = row.get("concurrency"), (row.get("concurrency") or 0) * cfg.sweep_waves
        checks.append(
            (
                row.get("requests") == want and row.get("total_tokens") == want * cfg.sweep_max_tokens,
                f"sweep at {c}: {row.get('total_tokens')} tokens from {row.get('requests')} requests, "
                f"expected {want * cfg.sweep_max_tokens} from {want}",
            )
        )
    return checks


async def run(ctx: Context, cfg: SpeedGate) -> None:
    r = ctx.result
    r.formulas = FORMULAS
    r.thresholds = {
        k: v
        for k, v in {
            "min_decode_tok_s_1_stream": cfg.min_decode_tok_s_1_stream,
            "min_decode_tok_s_4_streams": cfg.min_decode_tok_s_4_streams,
            "max_ttft_2k_s": cfg.max_ttft_2k_s,
            "max_ttft_8k_s": cfg.max_ttft_8k_s,
            "decode_tokens": cfg.decode_max_tokens,
        }.items()
        if v is not None
    }
    m = r.measured

    # Decode speed, one stream then four.
    s1 = await _decode(ctx, cfg, "decode1")
    m["decode_tokens"] = {"1_stream": s1.completion_tokens}
    m["decode_tok_s_1_stream"] = decode_rate(s1.token_times())
    streams4 = await asyncio.gather(*(_decode(ctx, cfg, f"decode4/{i}") for i in range(4)))
    m["decode_tokens"]["4_streams"] = [s.completion_tokens for s in streams4]
    rates4 = [decode_rate(s.token_times()) for s in streams4]
    m["decode_tok_s_4_streams"] = sum(x for x in rates4 if x) if all(rates4) else None
    m["decode_tok_s_4_streams_each"] = [round(x, 2) if x else None for x in rates4]

    # TTFT of uncached prompts, one at a time.
    rng = random.Random(cfg.seed)
    for n in cfg.ttft_prompts_tokens:
        ctx.check_fits(n, 2, f"TTFT prompt {n}")
    before = await ctx.server.get_text("/metrics")
    (ctx.out_dir / "speed.metrics-before.prom").write_text(before)
    ttft = {}
    for n in cfg.ttft_prompts_tokens:
        ids = await ctx.uncached_prompt_ids(n, rng)
        s = await ctx.server.stream(
            "/v1/completions", {"prompt": ids, "max_tokens": 2, "temperature": 0.0, "ignore_eos": True}, tag=f"ttft{n}"
        )
        ttft[n] = s.ttft_s
        r.items.append({"ttft_prompt_tokens": n, "ttft_s": s.ttft_s})
    after = await ctx.server.get_text("/metrics")
    (ctx.out_dir / "speed.metrics-after.prom").write_text(after)
    m["ttft_s"] = {str(n): (round(v, 4) if v is not None else None) for n, v in ttft.items()}
    m["prefix_cache_hits_during_ttft"] = metrics.delta(before, after, "vllm:prefix_cache_hits")

    # Concurrency sweep: aggregate = total tokens / drain time.
    rows = []
    for c in cfg.sweep_concurrencies:
        n_req = c * cfg.sweep_waves

        async def one(i, c=c):
            body = await ctx.server.post(
                "/v1/completions",
                {
                    "prompt": f"{DECODE_PROMPT} (version {i})",
                    "max_tokens": cfg.sweep_max_tokens,
                    "temperature": 0.0,
                    "ignore_eos": True,
                },
                tag=f"sweep{c}/{i}",
            )
            return (body.get("usage") or {}).get("completion_tokens") or 0

        t0 = time.perf_counter()
        tokens = await bounded_gather(c, [one(i) for i in range(n_req)])
        t1 = time.perf_counter()
        row = {
            "concurrency": c,
            "requests": n_req,
            "total_tokens": sum(tokens),
            "drain_s": round(t1 - t0, 3),
            "aggregate_tok_s": round(sweep_aggregate(tokens, t0, t1), 2),
        }
        rows.append(row)
        r.items.append({"sweep": row})
    m["sweep"] = rows
    if rows:
        why = plot(rows, ctx.out_dir / "speed-sweep.png")
        m["sweep_plot"] = None if why else "speed-sweep.png"
        if why:
            m["sweep_plot_note"] = why
    for k in ("decode_tok_s_1_stream", "decode_tok_s_4_streams"):
        if isinstance(m.get(k), float):
            m[k] = round(m[k], 2)
    r.judge(verdict(m, r.items, cfg))


def sweep_table(rows: list[dict]) -> str:
    lines = ["| concurrency | requests | total tokens | drain s | aggregate tok/s |", "|---|---|---|---|---|"]
    lines += [
        f"| {x['concurrency']} | {x['requests']} | {x['total_tokens']} | {x['drain_s']} | {x['aggregate_tok_s']} |"
        for x in rows
    ]
    return "\n".join(lines)
