#!/usr/bin/env python3
"""A running server at 1, 4, 16 and 64 concurrent streams, beside the KV pool vLLM reports per rank.

For the parallelism variants (TP2, TP4, DP2, TP2 x DP2, each with and without expert
parallelism): start the variant's server with its log going to a file, then

    .venv/bin/python benchmarks/parallel_sweep.py http://127.0.0.1:8000 --log server.log \\
        [--streams 1,4,16,64] [--max-tokens 256] [--waves 2] [--predicted-kv-tokens N] [--json out.json]

Per level: `streams x waves` streamed completions (temperature 0, ignore_eos, the speed gate's
prompt and formulas: cookbook.gates.speed), at most `streams` in flight. It prints aggregate
tok/s (completion tokens / drain time), the median per-stream decode tok/s and TTFT, then
every KV pool line of the log with the process that wrote it: `Available KV cache memory:
X GiB` (a worker, e.g. `Worker_TP0`; vLLM logs it once per node-local first rank) and `KV
cache size: N tokens` (each engine core, e.g. `EngineCore_DP1`), beside the plan's
prediction when given (--predicted-kv-tokens, --predicted-kv-gib), so a replicated MLA
latent shows as the same token capacity on every TP rank.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from cookbook.gates.client import Server, bounded_gather
from cookbook.gates.speed import level_metrics, workload_prompts
from cookbook.recipe.gates_spec.speed import SpeedGate

STREAMS = (1, 4, 16, 64)
# vLLM's log prefix names the process: "(Worker_TP1 pid=4242) INFO 12-01 ...", "(EngineCore_DP0 pid=...)".
_PROC = r"(?:\((?P<proc>[A-Za-z0-9_]+) pid=\d+\)\s+)?"
KV_MEMORY = re.compile(_PROC + r".*?Available KV cache memory: (?P<gib>[0-9.]+) GiB")
KV_TOKENS = re.compile(
    _PROC + r".*?(?P<pool>[A-Z]+(?: \+ host)?) KV cache size: (?P<tokens>[0-9,]+) tokens, "
    r"Maximum concurrency for (?P<len>[0-9,]+) tokens per request: (?P<conc>[0-9.]+)x"
)


def kv_pools(log_text: str) -> list[dict]:
    """Every KV pool line of a vLLM log, in order, with the process that logged it ('main' when
    the line has no process prefix)."""
    out = []
    for line in log_text.splitlines():
        if m := KV_MEMORY.search(line):
            out.append({"process": m["proc"] or "main", "available_gib": float(m["gib"])})
        elif m := KV_TOKENS.search(line):
            out.append(
                {
                    "process": m["proc"] or "main",
                    "pool": m["pool"],
                    "kv_tokens": int(m["tokens"].replace(",", "")),
                    "max_model_len": int(m["len"].replace(",", "")),
                    "max_concurrency": float(m["conc"]),
                }
            )
    return out


async def level(server: Server, streams: int, waves: int, max_tokens: int) -> dict:
    """One level in the speed gate's terms (natural prompts with unique suffixes, vllm bench's figures)."""
    cfg = SpeedGate(calibrated_on="parallel_sweep", sweep_concurrencies=[streams], sweep_requests=streams * waves)
    prompts = workload_prompts(cfg, f"sweep{time.time_ns()}")[streams]

    async def one(i: int, prompt: str):
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True}
        return await server.stream("/v1/completions", body, tag=f"sweep{streams}/{i}")

    t0 = time.perf_counter()
    done = await bounded_gather(streams, [one(i, p) for i, p in enumerate(prompts)])
    m = level_metrics(done, time.perf_counter() - t0)
    tpot = m["median_tpot_ms"]
    return {
        "streams": streams,
        "requests": m["requests"],
        "total_tokens": m["total_tokens"],
        "drain_s": m["duration_s"],
        "aggregate_tok_s": m["output_throughput"],
        "median_decode_tok_s": round(1000 / tpot, 2) if tpot else None,
        "median_ttft_s": round(m["median_ttft_ms"] / 1000, 4) if m["median_ttft_ms"] is not None else None,
    }


async def first_model(server: Server) -> str:
    models = await server.get_json("/v1/models")
    return models["data"][0]["id"]


async def sweep(url: str, model: str | None, streams: list[int], waves: int, max_tokens: int) -> tuple[str, list]:
    server = Server(url, model or "")
    try:
        server.model = model or await first_model(server)
        return server.model, [await level(server, s, waves, max_tokens) for s in streams]
    finally:
        await server.aclose()


def table(rows: list[dict]) -> str:
    head = "| streams | requests | total tokens | drain s | aggregate tok/s | median decode tok/s | median TTFT s |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r[k] for k in ("streams", "requests", "total_tokens", "drain_s", "aggregate_tok_s")]
        cells += [r["median_decode_tok_s"], r["median_ttft_s"]]
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    return "\n".join(lines)


def pool_table(pools: list[dict], predicted_tokens: int | None, predicted_gib: float | None) -> str:
    lines = ["| process | reported | predicted (plan) |", "|---|---|---|"]
    for p in pools:
        if "available_gib" in p:
            pred = f"{predicted_gib:g} GiB" if predicted_gib is not None else "-"
            lines.append(f"| {p['process']} | {p['available_gib']:g} GiB available for KV | {pred} |")
        else:
            pred = f"{predicted_tokens:,} tokens" if predicted_tokens is not None else "-"
            lines.append(
                f"| {p['process']} | {p['pool']} {p['kv_tokens']:,} tokens "
                f"({p['max_concurrency']:g}x {p['max_model_len']:,}) | {pred} |"
            )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url", help="the server's base URL, e.g. http://127.0.0.1:8000")
    ap.add_argument("--model", help="served model name (default: the first of /v1/models)")
    ap.add_argument("--log", type=Path, help="the server's log, for the KV pool vLLM reports per rank")
    ap.add_argument("--streams", default=",".join(map(str, STREAMS)), help="concurrency levels (default 1,4,16,64)")
    ap.add_argument("--waves", type=int, default=2, help="requests per level = streams x waves (default 2)")
    ap.add_argument("--max-tokens", type=int, default=256, help="completion tokens per request (default 256)")
    ap.add_argument("--predicted-kv-tokens", type=int, help="the plan's KV token capacity per engine, to print beside")
    ap.add_argument("--predicted-kv-gib", type=float, help="the plan's KV memory per rank (GiB), to print beside")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = ap.parse_args(argv)
    try:
        args.streams = [int(s) for s in args.streams.split(",")]
    except ValueError:
        ap.error(f"--streams {args.streams!r}: give whole numbers separated by commas, e.g. 1,4,16,64")
    if any(s < 1 for s in args.streams) or args.waves < 1 or args.max_tokens < 1:
        ap.error("--streams, --waves and --max-tokens must be positive")
    if args.log is not None and not args.log.is_file():
        ap.error(f"--log {args.log}: no such file (start the server with its output going to a file)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model, rows = asyncio.run(sweep(args.url, args.model, args.streams, args.waves, args.max_tokens))
    pools = kv_pools(args.log.read_text(errors="replace")) if args.log else []
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# {model} at {args.url}, {when}, client {platform.node()}")
    print(f"# {' '.join(['benchmarks/parallel_sweep.py', *(argv if argv is not None else sys.argv[1:])])}\n")
    print(table(rows))
    if args.log:
        print()
        print(
            pool_table(pools, args.predicted_kv_tokens, args.predicted_kv_gib)
            if pools
            else "(no KV pool line in the log)"
        )
    if args.json:
        out = {"model": model, "url": args.url, "date": when, "sweep": rows, "kv_pools": pools}
        out["predicted"] = {"kv_tokens": args.predicted_kv_tokens, "kv_gib": args.predicted_kv_gib}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
