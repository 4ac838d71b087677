#!/usr/bin/env python3
"""The speed gate's figures against `vllm bench serve`'s, on one server, the same prompts, in one run.

Starts the recipe's server (its launch block, plus VLLM_SERVER_DEV_MODE=1 for
/reset_prefix_cache), then at each of the speed gate's concurrencies:
  1. the gate's own level measurement (cookbook.gates.speed.measure_level) on the gate's prompts;
  2. `vllm bench serve --dataset-name custom` on exactly those prompts (a JSONL file), raw
     completions (--skip-chat-template), same length (--custom-output-len, --ignore-eos), greedy;
the prefix cache is reset before each, and the order alternates by level so that neither
tool always runs second. With --repeats N each level runs the pair N times back to back, the
order flipping each time (gate bench, bench gate, ...): the server's drift then shows as both
tools moving together between pairs, and a client's own bias as a ratio that stays off 1 in
every pair. Prints both tools' figures and gate/bench ratios per pair, then each level's median
ratio over its pairs; a figure agrees when the ratio is within 10%. Writes everything (and vllm bench's own JSON per level) to
--out (default .cache/bench/speed-vs-vllm-bench-<time>/).

    .venv/bin/python benchmarks/speed_gate_vs_vllm_bench.py [gemma3-270m-cpu] [--concurrencies 1 4 16]
        [--vllm-python /path/to/engine/python] [--min-waves N] [--rounds N] [--repeats N]

`vllm bench serve` is run as `PYTHON -m vllm.entrypoints.cli.main bench serve`: PYTHON is
--vllm-python, else this interpreter when it can import vllm, else a `vllm` on PATH; so it runs
on a host whose engine lives in another environment (the offline GPU host) as well as here.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from cookbook.gates import speed
from cookbook.gates.client import Server
from cookbook.gates.context import Context
from cookbook.gates.data import DataPaths
from cookbook.gates.result import GateResult
from cookbook.recipe.paths import repo_root
from cookbook.recipe.resolve import resolve
from cookbook.serving import local

FIGURES = ("output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms")
FIGURES += ("median_itl_ms", "p99_itl_ms", "median_e2el_ms", "p99_e2el_ms")
AGREE = 0.10


def reset_prefix_cache(base_url: str) -> None:
    r = httpx.post(base_url + "/reset_prefix_cache", timeout=60)
    r.raise_for_status()


VLLM_CLI = "vllm.entrypoints.cli.main"


def vllm_command(python: str | None = None) -> list[str]:
    """How to run vLLM's CLI: `PYTHON -m vllm.entrypoints.cli.main` with --vllm-python, else with this
    interpreter when it can import vllm, else the `vllm` on PATH; exits with one message when none."""
    if python:
        if not Path(python).is_file():
            sys.exit(f"error: --vllm-python {python}: no such interpreter")
        return [python, "-m", VLLM_CLI]
    if importlib.util.find_spec("vllm") is not None:
        return [sys.executable, "-m", VLLM_CLI]
    found = shutil.which("vllm")
    if found:
        return [found]
    sys.exit(
        "error: vllm is neither importable by this interpreter nor on PATH; "
        "pass --vllm-python with the engine environment's python"
    )


def requests_per_level(requests: int, min_waves: int, levels: list[int]) -> dict[int, int]:
    """Requests at each concurrency: `requests`, or `min_waves` times the concurrency where that is more,
    so a high level is not one burst whose tail decides its throughput."""
    return {c: max(requests, min_waves * c) for c in levels}


def run_vllm_bench(
    base_url: str, model: str, tokenizer: str, prompts: list[str], c: int, max_tokens: int, out: Path, vllm: list[str]
):
    data = out / f"prompts-c{c}.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    argv = [
        *vllm,
        "bench",
        "serve",
        "--backend",
        "openai",
        "--base-url",
        base_url,
        "--endpoint",
        "/v1/completions",
        "--model",
        model,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(data),
        "--custom-output-len",
        str(max_tokens),
        "--skip-chat-template",
        "--disable-shuffle",
        "--num-prompts",
        str(len(prompts)),
        "--max-concurrency",
        str(c),
        "--ignore-eos",
        "--temperature",
        "0",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(out),
        "--result-filename",
        f"vllm-bench-c{c}.json",
    ]
    log = out / f"vllm-bench-c{c}.log"
    with open(log, "w") as fh:
        p = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        sys.exit(f"error: vllm bench serve failed (exit {p.returncode}); its log: {log}\n{log.read_text()[-3000:]}")
    return json.loads((out / f"vllm-bench-c{c}.json").read_text())


async def gate_level(base_url: str, model: str, prompts: list[str], c: int, max_tokens: int, out: Path) -> dict:
    server = Server(base_url, model, request_timeout_s=1800)
    ctx = Context(server=server, data=DataPaths(), out_dir=out, result=GateResult(name="speed"))
    try:
        row, _ = await speed.measure_level(ctx, prompts, c, max_tokens)
        return row
    finally:
        await server.aclose()


def figure_ratio(gate, bench) -> float | None:
    """gate / bench for one figure, or None where either is missing or bench's is 0."""
    if isinstance(gate, (int, float)) and isinstance(bench, (int, float)) and bench:
        return gate / bench
    return None


def agrees(ratio: float | None) -> str:
    return "yes" if ratio is not None and abs(ratio - 1) <= AGREE else "NO"


def median_ratios(rows: list[dict]) -> dict[tuple[int, str], dict]:
    """Each (concurrency, figure)'s gate/bench ratios over its pairs (every round and repeat): the
    median, the range and how many pairs had both figures."""
    out: dict[tuple[int, str], dict] = {}
    for c in dict.fromkeys(row["concurrency"] for row in rows):
        for f in FIGURES:
            got = [figure_ratio(row["gate"].get(f), row["bench"].get(f)) for row in rows if row["concurrency"] == c]
            got = sorted(x for x in got if x is not None)
            if got:
                out[(c, f)] = {
                    "pairs": len(got),
                    "median": round(statistics.median(got), 3),
                    "lowest": round(got[0], 3),
                    "highest": round(got[-1], 3),
                }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe", nargs="?", default="gemma3-270m-cpu")
    ap.add_argument("--concurrencies", type=int, nargs="+", help="default: the speed gate's sweep_concurrencies")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--vllm-python", help="the python of the environment holding vllm (default: see above)")
    ap.add_argument("--requests", type=int, help="requests a level (default: the speed gate's sweep_requests)")
    ap.add_argument(
        "--min-waves",
        type=int,
        default=1,
        help="send at least this many times the concurrency at each level (default 1): one wave of 64 "
        "streams lasts about a second on an H200, too short for a 10%% comparison",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="passes over the levels; each pass flips which tool goes first (default 1)",
    )
    ap.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="gate/bench pairs at each level within a round, back to back, the order flipping each time (default 1)",
    )
    args = ap.parse_args()
    if args.repeats < 1:
        sys.exit(f"error: --repeats {args.repeats}: give 1 or more")
    if args.rounds < 1:
        sys.exit(f"error: --rounds {args.rounds}: give 1 or more")
    if args.min_waves < 1:
        sys.exit(f"error: --min-waves {args.min_waves}: give 1 or more")
    vllm = vllm_command(args.vllm_python)
    resolved = resolve(args.recipe)
    cfg = resolved.recipe.gates.speed
    if cfg is None:
        sys.exit(f"error: {args.recipe} declares no speed gate")
    levels = args.concurrencies or list(cfg.sweep_concurrencies)
    if args.requests is not None and args.requests < max(levels):
        sys.exit(f"error: --requests {args.requests}: give at least the largest concurrency ({max(levels)})")
    per_level = requests_per_level(args.requests or cfg.sweep_requests, args.min_waves, levels)
    # The prompts are made for the largest count, and each level takes its first per_level[c].
    cfg = cfg.model_copy(update={"sweep_concurrencies": levels, "sweep_requests": max(per_level.values())})
    out = (
        args.out
        or repo_root() / ".cache" / "bench" / f"speed-vs-vllm-bench-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    )
    out.mkdir(parents=True, exist_ok=True)
    model = str(resolved.recipe.serve.arg("served_model_name"))
    env = local.prepare(resolved, out)
    env["VLLM_SERVER_DEV_MODE"] = "1"  # POST /reset_prefix_cache between the two tools
    tokenizer = local.exported_env(resolved, env)["CHECKPOINT_DIR"]
    made = speed.workload_prompts(cfg, uuid.uuid4().hex[:12])
    prompts = {c: made[c][: per_level[c]] for c in levels}
    loads, rows = [], []
    server = local.launch(resolved, env, out)
    try:
        local.wait_ready(server, 900)
        passes = ((r, k, c, i) for r in range(args.rounds) for k, c in enumerate(levels) for i in range(args.repeats))
        for r, k, c, i in passes:
            loads.append(Path("/proc/loadavg").read_text().split()[:3])
            order = ("gate", "bench") if (k + r + i) % 2 == 0 else ("bench", "gate")
            got = {}
            # each pass's vllm bench JSON and gate transcripts kept apart
            where = out / f"round-{r + 1}" / f"repeat-{i + 1}" if args.repeats > 1 else out / f"round-{r + 1}"
            where.mkdir(parents=True, exist_ok=True)
            for tool in order:
                reset_prefix_cache(server.base_url)
                local.step(f"round {r + 1}, concurrency {c}, pair {i + 1}/{args.repeats}: {tool}")
                if tool == "gate":
                    got["gate"] = asyncio.run(
                        gate_level(server.base_url, model, prompts[c], c, cfg.sweep_max_tokens, where)
                    )
                else:
                    got["bench"] = run_vllm_bench(
                        server.base_url, model, tokenizer, prompts[c], c, cfg.sweep_max_tokens, where, vllm
                    )
            rows.append({"round": r + 1, "concurrency": c, "repeat": i + 1, "order": list(order), **got})
    finally:
        server.stop()

    lines = [
        "| round | concurrency | pair | first | figure | gate | vllm bench | gate / bench | within 10% |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    worst = 0.0
    for row in rows:
        for f in FIGURES:
            a, b = row["gate"].get(f), row["bench"].get(f)
            ratio = figure_ratio(a, b)
            if ratio is not None:
                worst = max(worst, abs(ratio - 1))
            lines.append(
                f"| {row['round']} | {row['concurrency']} | {row['repeat']} | {row['order'][0]} | {f} | {a} | "
                f"{round(b, 2) if isinstance(b, float) else b} | {round(ratio, 3) if ratio else None} | {agrees(ratio)} |"
            )
    medians = median_ratios(rows)
    lines += ["", "| concurrency | figure | pairs | median gate / bench | lowest | highest | within 10% |"]
    lines += ["|---|---|---|---|---|---|---|"]
    for (c, f), got in medians.items():
        lines.append(
            f"| {c} | {f} | {got['pairs']} | {got['median']} | {got['lowest']} | {got['highest']} | {agrees(got['median'])} |"
        )
    summary = {
        "recipe": resolved.slug,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "loadavg_before_each_level": loads,
        "requests_per_level": per_level,
        "max_tokens": cfg.sweep_max_tokens,
        "rows": rows,
        "largest_relative_difference": round(worst, 4),
        "median_ratio_by_level": [{"concurrency": c, "figure": f, **got} for (c, f), got in medians.items()],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nload average before each level: {loads}\nwritten to {out}")


if __name__ == "__main__":
    main()
