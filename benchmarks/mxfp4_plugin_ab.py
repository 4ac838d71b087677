#!/usr/bin/env python3
"""The MXFP4 MoE plugin off, then on: one recipe served twice in one run, on one GPU.

Both servers run the recipe's own launch block (`cookbook.serving.local`); the only difference
is COOKBOOK_MXFP4_MOE=0 or 1 in the environment the block starts in (its export keeps a
caller's value). Against each:
  1. greedy completions of N fixed prompts (temperature 0, 32 tokens, top-5 logprobs);
  2. `vllm bench serve` (vLLM's own client) on random 256-token prompts, 128 output tokens,
     ignore-eos, at each concurrency, after 2x-concurrency untimed warm-up requests: aggregate
     output tok/s, mean TPOT and mean TTFT.
Then: how many greedy outputs are identical, and for the others whether the first differing
token is a near-tie (within TIE nats in both runs' own logprobs, both tokens in each run's
top-5); the ratios on/off; and, with --layer-bench (`python benchmarks/mxfp4_moe/layer_bench.py`),
the 1-stream gain Amdahl's law predicts from the MoE share of the bytes a decode step reads.

    python benchmarks/mxfp4_plugin_ab.py dsv4-flash-perf-h200 --out DIR [--layer-bench FILE] [--side off|on | --together]

Writes DIR/ab.json (everything) and DIR/ab.md (the table for the recipe's README). `--side` serves one
of the two and keeps its figures in DIR/<side>/run.json; the run that finds both compares them. On a
machine whose calls are limited to 10 minutes the two sides go in two calls, into the same DIR, and a
side stopped part-way continues from DIR/<side>/progress.json on its next run (`--fresh`: start over).
`--together` starts both servers at once on the one GPU (ports 8000 and 8001, a fixed 8 GiB KV pool each)
and measures them in turn: untimed passes of the sweep on each (again at a concurrency while a pass
stalls, up to WARM_PASSES), then ROUNDS[c] off/on pairs at each concurrency in ABBA order (--rounds N:
at most N), each figure the median of its rounds; the server not being measured is paused (SIGSTOP)
during each run. One start's wait, not two, and a drift or a stall in one round shows as a
range (serve_together).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

import httpx
from host_load import HostLoad

from cookbook.kernels.mxfp4_moe.shapes import VARIANTS
from cookbook.recipe.resolve import resolve
from cookbook.serving import local

ENV = "COOKBOOK_MXFP4_MOE"
PLUGIN_ON = "cookbook MXFP4 MoE plugin: kernel on"  # cookbook.vllm_plugin's log line when it takes the forward
CONCURRENCIES = (1, 4, 16, 64)
TIE = 0.05  # nats: see accept_divergence
BENCH_TIMEOUT_S = 300  # one `vllm bench serve` run: seconds on the H200
# --together: off/on pairs at each concurrency, alternating. More at 1 and 4 streams, whose runs are
# short and whose expected gain is a few percent: one H200 server's median TPOT at 1 stream moved
# between 3.0 and 4.1 ms from round to round
ROUNDS = {1: 5, 4: 5, 16: 3, 64: 3}
STALL = 3.0  # a run whose mean TTFT is over STALL x its median held a stall (a compile) in a few requests
WARM_PASSES = 3  # --together: untimed runs at a concurrency, until one has no stall
TOPICS = (
    "the history of bridges",
    "how rain forms",
    "a recipe for bread",
    "the rules of chess",
    "why the sky is blue",
    "a trip to the mountains",
    "the life of bees",
    "how engines work",
    "a letter to a friend",
    "the moon landing",
    "learning a new language",
    "the ocean at night",
    "building a wooden boat",
    "the first computers",
    "a quiet library",
    "the winter market",
)
PROMPTS = tuple(f"Write one paragraph about {t}:" for t in TOPICS)


def greedy(base_url: str, model: str) -> list[dict]:
    out = []
    with httpx.Client(timeout=120) as client:
        for prompt in PROMPTS:
            body = {
                "model": model,
                "prompt": prompt,
                "max_tokens": 32,
                "temperature": 0,
                "logprobs": 5,
                "return_tokens_as_token_ids": True,
            }
            r = client.post(f"{base_url}/v1/completions", json=body)
            r.raise_for_status()
            lp = r.json()["choices"][0]["logprobs"]
            out.append({"tokens": lp["tokens"], "logprobs": lp["token_logprobs"], "top": lp["top_logprobs"]})
    return out


def accept_divergence(off: dict, on: dict, i: int) -> bool:
    """At the first differing position i, a near-tie: each run ranks the other's token in its top-5 within
    TIE nats of its own choice. Why a tolerance: the two paths' MoE outputs differ by up to the kernel's
    1e-2 relative bound (both are within 4e-3 of exact), and on random weights the best two of 262144
    logits are often closer than that moves them."""
    if i >= min(len(off["tokens"]), len(on["tokens"])):
        return False
    a, b = off["tokens"][i], on["tokens"][i]
    ta, tb = off["top"][i] or {}, on["top"][i] or {}
    return b in ta and a in tb and ta[a] - ta[b] <= TIE and tb[b] - tb[a] <= TIE


def compare(off: list[dict], on: list[dict]) -> dict:
    same, ties, bad, max_dlp = 0, 0, [], 0.0
    for k, (a, b) in enumerate(zip(off, on, strict=True)):
        n = next((i for i, (x, y) in enumerate(zip(a["tokens"], b["tokens"])) if x != y), None)
        if n is None and len(a["tokens"]) != len(b["tokens"]):
            n = min(len(a["tokens"]), len(b["tokens"]))  # one stopped (EOS) where the other went on
        common = len(a["tokens"]) if n is None else n
        for i in range(common):
            if a["logprobs"][i] is not None and b["logprobs"][i] is not None:
                max_dlp = max(max_dlp, abs(a["logprobs"][i] - b["logprobs"][i]))
        if n is None:
            same += 1
        elif accept_divergence(a, b, n):
            ties += 1
        else:
            bad.append({"prompt": k, "position": n})
    spread = max((max(t.values()) - min(t.values()) for run in (*off, *on) for t in run["top"] if t), default=0.0)
    return {
        "prompts": len(off),
        "identical": same,
        "near_ties": ties,
        "refused": bad,
        "max_abs_logprob_diff_common_prefix": max_dlp,
        "tie_nats": TIE,
        "top5_spread_nats": spread,
        # every top 5 within TIE: any divergence would pass as a near-tie, so the comparison cannot fail
        "informative": spread > TIE,
    }


def bench_argv(base_url: str, model: str, tokenizer: str, c: int, workdir: Path, name: str | None = None) -> list[str]:
    """`vllm bench serve` at concurrency c. Its 2c warm-up requests go first, untimed: DeepGEMM compiles a
    kernel the first time a shape runs (VLLM_DEEP_GEMM_WARMUP=skip), as DeepSeek-V4's TileLang mHC kernels
    did before the fix dsv4-mhc-warmup-nvidia (6-17 s each on the H200), so an unwarmed first side paid
    seconds of TTFT that the second, finding the compile caches full, did not."""
    argv = ["vllm", "bench", "serve", "--backend", "vllm", "--base-url", base_url, "--model", model]
    argv += ["--tokenizer", tokenizer, "--dataset-name", "random", "--random-input-len", "256"]
    argv += ["--random-output-len", "128", "--ignore-eos", "--num-prompts", str(max(16, 4 * c))]
    argv += ["--num-warmups", str(2 * c), "--max-concurrency", str(c), "--seed", "0", "--disable-tqdm"]
    argv += ["--percentile-metrics", "ttft,tpot", "--save-result", "--result-dir", str(workdir)]
    return argv + ["--result-filename", f"{name or f'bench-c{c}'}.json"]


def bench(
    base_url: str, model: str, tokenizer: str, c: int, workdir: Path, name: str | None = None, pids: tuple = ()
) -> dict:
    """One `vllm bench serve` run, in this process: vLLM's client code itself (vllm.benchmarks.serve, the
    same parser and coroutine its CLI runs), imported once instead of once a run (about 25 s a run on the
    H200). A server that stops answering ends the run after BENCH_TIMEOUT_S (seen on the H200 at 64
    streams), with the figures so far kept, instead of holding the GPU until the machine is taken back.
    `host`: what the GPU, the machine and the server's processes (pids: their roots) did during the run
    (benchmarks/host_load.py), to tell a step that waits on the GPU from one that waits on the host."""
    from vllm.benchmarks.serve import add_cli_args, main_async
    from vllm.third_party import pynvml
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    argv = bench_argv(base_url, model, tokenizer, c, workdir, name)
    local.step(f"concurrency {c}: " + local.quote_cmd(argv))
    cached = jit_kernels()
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(argv[3:])
    result = workdir / args.result_filename
    with (
        result.with_suffix(".log").open("w") as log,
        contextlib.redirect_stdout(log),
        HostLoad(pids, pynvml) as load,
    ):
        asyncio.run(asyncio.wait_for(main_async(args), BENCH_TIMEOUT_S))
    res = json.loads(result.read_text())
    busy = load.summary["gpu_busy_pct"]
    return {
        "tok_s": res["output_throughput"],
        "tpot_ms": res["mean_tpot_ms"],
        "ttft_ms": res["mean_ttft_ms"],
        "ttft_median_ms": res["median_ttft_ms"],
        "compiled": jit_kernels() - cached,
        "host": load.summary,
        # the GPU's busy time per output token (busy share x the timed run's length: the warm-up requests
        # run at the same concurrency): what the step costs the GPU, whatever the host adds around it
        "gpu_ms_per_token": None if busy is None else busy / 100 * res["duration"] * 1000 / res["total_output_tokens"],
    }


# (environment variable, glob under it): one match per compiled kernel
JIT_CACHES = (("DG_JIT_CACHE_DIR", "cache/kernel.*"), ("TRITON_CACHE_DIR", "*/*.cubin"))


def jit_kernels() -> int:
    """Kernels in the JIT caches the servers write (scripts/offline-gpu/plugin-check points both at the
    same folders): the count before and after a run is what compiled inside it. DeepGEMM logs no
    compile; its cache's file times placed the 64-stream stalls on the H200 (2026-12-03), 9 GEMMs
    compiling inside one run."""
    return sum(len(list(Path(os.environ[var]).glob(g))) for var, g in JIT_CACHES if os.environ.get(var))


def stalled(row: dict) -> bool:
    """A few requests waited seconds for their first token while the rest did not: on the H200 a kernel
    compiled inside the run (DeepGEMM's, Triton's), 8.6 s mean TTFT against a 0.39 s median at 64 streams."""
    return row["ttft_ms"] > STALL * row["ttft_median_ms"]


def kept_side(path: Path) -> dict:
    """One side's figures as an earlier `--side` run kept them (JSON: the concurrencies come back as text)."""
    run = json.loads(path.read_text())
    run["sweep"] = {int(c): row for c, row in run["sweep"].items()}
    return run


def resumable(progress: Path, recipe_hash: str) -> dict | None:
    """What an earlier, stopped run of this side finished, if it served the same recipe."""
    if not progress.exists():
        return None
    run = kept_side(progress)
    return run if run.get("recipe_hash") == recipe_hash else None


def model_and_tokenizer(resolved, run_env: dict) -> tuple[str, str]:
    """The served model's name and the tokenizer folder the benchmark client reads (the checkpoint's)."""
    return str(resolved.recipe.serve.arg("served_model_name")), local.exported_env(resolved, run_env)["CHECKPOINT_DIR"]


def serve_side(resolved, label: str, run_env: dict, work: Path, ready_timeout_s: float, fresh: bool) -> dict:
    """One side: greedy completions, then each concurrency, on one server. Progress is written to
    work/progress.json after each step, so a run stopped part-way (a device call's time limit, which
    the cold side's kernel compiles can pass) continues on the next run of the same side, on a new
    server of the same recipe, instead of starting over."""
    progress = work / "progress.json"
    run = None if fresh else resumable(progress, resolved.content_hash)
    if run:
        done = ", ".join(str(c) for c in run["sweep"]) or "none"
        local.note(f"{label}: continuing a stopped run (greedy kept; concurrencies done: {done}); --fresh starts over")
    else:
        run = {"recipe_hash": resolved.content_hash, "ready_s": [], "greedy": None, "sweep": {}}

    def save() -> None:
        progress.write_text(json.dumps(run, indent=2) + "\n")

    model, tok = model_and_tokenizer(resolved, run_env)
    server = local.launch(resolved, run_env, work)
    try:
        run["ready_s"].append(local.wait_ready(server, ready_timeout_s))
        if run["greedy"] is None:
            run["greedy"] = greedy(server.base_url, model)
            save()
        for c in CONCURRENCIES:
            if c not in run["sweep"]:
                run["sweep"][c] = bench(server.base_url, model, tok, c, work, pids=(server.process.pid,))
                save()
    finally:
        server.stop()
    return finish_side(run, work)


def finish_side(run: dict, work: Path) -> dict:
    """What the stopped server's log says: the weights' size, whether the plugin took the forward,
    and what compiled after it was up."""
    log = (work / "server.log").read_text(errors="replace")
    run["weights_gib"] = weights_gib(log)
    run["plugin_on_logged"] = PLUGIN_ON in log
    run.setdefault("compiled_after_ready", []).append(compiled_after_ready(log))
    return run


def together_sets(port: int) -> list[str]:
    """One side's settings when both servers share the GPU: its own port, and a fixed KV pool instead of
    a share of the GPU. Why fixed: vLLM sizes the pool from the memory it sees used while it profiles,
    and the other server's start moves that; 8 GiB holds 64 streams of 384 tokens many times over (the
    recipe's 0.9 share gives about 90 GiB). 0.4 is what each must find free when its worker starts."""
    return [
        f"serve.args.port={port}",
        "serve.args.gpu_memory_utilization=0.4",
        "serve.args.kv_cache_memory_bytes=8589934592",
    ]


def serve_together(
    sides: dict[str, tuple], out: Path, ready_timeout_s: float, rounds: dict[int, int] = ROUNDS
) -> dict[str, dict]:
    """Both sides up at once on one GPU (`sides`: label -> the recipe resolved with its together_sets, and
    the environment its block starts in), measured in turn: greedy on each, untimed passes of the sweep
    on each, then rounds[c] off/on pairs at each concurrency in ABBA order, so that whatever drifts over
    the run (clocks, the machine) falls on both. The other server is paused during each measured run
    (Server.paused), so it takes neither CPU nor GPU time. One start's wait instead of two: the starts
    compile on the CPU side by side. Progress is written to <side>/progress.json after each step."""
    runs, servers, works, where = {}, {}, {}, {}
    try:
        t0 = time.monotonic()
        for label, (resolved, run_env) in sides.items():
            works[label] = out / label
            works[label].mkdir(parents=True, exist_ok=True)
            runs[label] = {
                "recipe_hash": resolved.content_hash,
                "mode": "together",
                "ready_s": [],
                "greedy": None,
                "sweep": {},
            }
            servers[label] = local.launch(resolved, run_env, works[label])
            where[label] = (servers[label].base_url, *model_and_tokenizer(resolved, run_env))
        for label, server in servers.items():
            local.wait_ready(server, max(1.0, ready_timeout_s - (time.monotonic() - t0)))
            runs[label]["ready_s"].append(time.monotonic() - t0)

        def save(label: str) -> None:
            (works[label] / "progress.json").write_text(json.dumps(runs[label], indent=2) + "\n")

        def alone(label: str, c: int, name: str) -> dict:
            """One measured run with the other server paused (SIGSTOP): with both scheduled, the measured
            server's 1-stream TPOT on the H200 was slower than alone and moved by a third between rounds
            (recipe README, GPU runs)"""
            with contextlib.ExitStack() as stack:
                for other in (s for k, s in servers.items() if k != label):
                    stack.enter_context(other.paused())
                return bench(*where[label], c, works[label], name, pids=(servers[label].process.pid,))

        for label in servers:
            runs[label]["greedy"] = greedy(*where[label][:2])
            save(label)
        # untimed passes of the whole sweep on each side first: Triton kernels of DeepSeek-V4's attention
        # metadata compiled inside timed runs on the H200 (vLLM's jit_monitor named them), after each
        # run's own warm-up requests, and one such compile at 1 stream is a quarter of the run; at 64
        # streams one pass still stalled, so a concurrency is warmed again until a pass runs clean
        for c in CONCURRENCIES:
            for label in servers:
                passes = runs[label].setdefault("warm", {}).setdefault(c, [])
                while not passes or (stalled(passes[-1]) and len(passes) < WARM_PASSES):
                    name = f"warm-c{c}" + (f"-{len(passes)}" if passes else "")
                    passes.append(alone(label, c, name))
                    save(label)
        for c in CONCURRENCIES:
            for r in range(rounds[c]):
                # ABBA: off first in even rounds, on first in odd ones, so neither side always goes first
                for label in list(servers)[:: 1 if r % 2 == 0 else -1]:
                    row = alone(label, c, f"bench-c{c}-r{r}")
                    runs[label].setdefault("rounds", {}).setdefault(c, []).append(row)
                    save(label)
            for label in servers:
                runs[label]["sweep"][c] = median_row(runs[label]["rounds"][c])
                save(label)
    finally:
        for server in servers.values():
            server.stop()
    return {label: finish_side(runs[label], works[label]) for label in runs}


def median_row(rows: list[dict]) -> dict:
    """Each figure's median over the rounds (one slow round, a compile or a stall, moves it least); in a
    nested record (`host`) each number's over the rounds that have one (a round without a GPU sample has
    None); a text, the first round's that has one."""
    out = {}
    for k, first in rows[0].items():
        values = [row.get(k) for row in rows if row.get(k) is not None]
        if isinstance(first, dict):
            out[k] = median_row(values)
        elif values and all(isinstance(v, (int, float)) for v in values):
            out[k] = statistics.median(values)
        else:
            out[k] = values[0] if values else None
    return out


def per_side(runs: dict, c: int, count) -> dict[str, int]:
    """count(row) summed over each side's rounds at concurrency c: {"off": n, "on": n}."""
    return {side: sum(count(row) for row in runs[side].get("rounds", {}).get(c, [])) for side in ("off", "on")}


def round_ratios(off: dict, on: dict, c: int, key: str = "tok_s") -> list[float]:
    """on/off tok/s (key "tpot_ms": off/on TPOT) of each round at concurrency c, pairing the rounds as they
    ran: [] for one round."""
    pairs = zip(off.get("rounds", {}).get(c, []), on.get("rounds", {}).get(c, []), strict=False)
    return [b[key] / a[key] if key == "tok_s" else a[key] / b[key] for a, b in pairs]


def compiled_after_ready(log: str) -> dict:
    """Kernels compiled after the server said it was up: each one lands in some request's TTFT. TileLang
    logs every compile; vLLM's jit_monitor names each Triton or TileLang kernel once (warning_once)."""
    _, _, after = log.partition("Application startup complete")
    names = re.findall(r"JIT compilation during inference: (\w+)", after)
    return {"tilelang_compiles": after.count("TileLang begins to compile"), "jit_monitor_kernels": sorted(set(names))}


def weights_gib(log: str) -> float | None:
    m = re.search(r"Model loading took ([\d.]+) GiB", log)
    return float(m.group(1)) if m else None


def amdahl(config: dict, weights: float | None, layer_bench: dict | None) -> dict | None:
    """Predicted 1-stream gain: f = MoE share of the bytes one decode step reads at 1 token (the k routed
    experts of each layer, over all weights but the unread experts and the embedding table, which is
    gathered), s = the kernel's speedup over vLLM's MoE at 1 token (layer_bench); 1 / ((1 - f) + f / s)."""
    if weights is None or not layer_bench:
        return None
    shape = VARIANTS["dsv4"]
    layers, e, k = config["num_hidden_layers"], config["n_routed_experts"], config["num_experts_per_tok"]
    expert = shape.expert_bytes()
    total = weights * 2**30
    read = total - layers * (e - k) * expert - config["vocab_size"] * config["hidden_size"] * 2
    f = layers * k * expert / read
    s = layer_bench["1"]["vllm_us"] / layer_bench["1"]["ours_us"]
    return {"moe_share_of_bytes": f, "kernel_speedup_1_token": s, "predicted_gain": 1 / ((1 - f) + f / s)}


HOST_COLUMNS = (
    ("gpu_busy_pct", "GPU busy %"),
    ("sm_clock_mhz", "SM clock MHz"),
    ("server_cpu_pct", "server's busiest process CPU %"),
    ("cpu_steal_pct", "CPU steal %"),
)


def host_table(sweep: dict) -> list[str]:
    """What the GPU and the host did during the timed runs (each figure the median of its rounds), off/on;
    [] when no run recorded it."""
    if not any(r[side].get("host") for r in sweep.values() for side in ("off", "on")):
        return []

    def cell(c: int, key: str) -> str:
        pair = [sweep[c][side].get("host", {}).get(key) for side in ("off", "on")]
        return " / ".join("-" if v is None else f"{v:.0f}" for v in pair)

    def gpu_time(c: int) -> str:
        off, on = (sweep[c][side].get("gpu_ms_per_token") for side in ("off", "on"))
        if off is None or on is None:
            return "- | -"
        return f"{off:.3f} / {on:.3f} | {off / on:.3f}"

    return [
        "| streams | GPU ms per token off / on | GPU time off/on | "
        + " | ".join(f"{title} off / on" for _, title in HOST_COLUMNS)
        + " |",
        "|---|---|---|" + "---|" * len(HOST_COLUMNS),
        *(f"| {c} | {gpu_time(c)} | " + " | ".join(cell(c, key) for key, _ in HOST_COLUMNS) + " |" for c in sweep),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe", nargs="?", default="dsv4-flash-perf-h200")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layer-bench", type=Path, help="JSON of `python benchmarks/mxfp4_moe/layer_bench.py`")
    ap.add_argument("--ready-timeout-s", type=float, default=600)
    ap.add_argument("--side", choices=("off", "on"), help="serve only this side (default: both, off first)")
    ap.add_argument("--fresh", action="store_true", help="start a side over instead of continuing a stopped run")
    ap.add_argument(
        "--together",
        action="store_true",
        help="both servers up at once (ports 8000 and 8001, 8 GiB of KV cache each), measured in turn",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        metavar="N",
        help=f"--together: at most N rounds at each concurrency (default {ROUNDS}), for a run short of device time",
    )
    args = ap.parse_args()
    if args.rounds is not None and args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: give 1 or more")
    if args.together and args.side:
        ap.error("--together serves both sides: leave out --side")
    if args.rounds is not None and not args.together:
        ap.error(
            f"--rounds {args.rounds}: only --together runs rounds (the other modes run one sweep a side); add --together or leave it out"
        )
    resolved = resolve(args.recipe)
    args.out.mkdir(parents=True, exist_ok=True)
    env = local.prepare(resolved, args.out)
    runs = {}
    if args.together:
        sides = {
            label: (resolve(args.recipe, sets=together_sets(port)), {**env, ENV: value})
            for label, port, value in (("off", 8000, "0"), ("on", 8001, "1"))
        }
        rounds = {c: min(n, args.rounds or n) for c, n in ROUNDS.items()}
        runs = serve_together(sides, args.out, args.ready_timeout_s, rounds)
        if not runs["on"]["plugin_on_logged"]:
            print("error: the plugin-on server's log does not say the plugin was on", file=sys.stderr)
            return 1
        for label, run in runs.items():
            (args.out / label / "run.json").write_text(json.dumps(run, indent=2) + "\n")
            (args.out / label / "progress.json").unlink(missing_ok=True)
    one_after_the_other = () if args.together else (("off", "0"), ("on", "1"))
    for label, value in one_after_the_other:
        work = args.out / label
        kept = work / "run.json"
        if args.side and label != args.side:
            if kept.exists():
                runs[label] = kept_side(kept)
            continue
        work.mkdir(exist_ok=True)
        kept.unlink(missing_ok=True)
        runs[label] = serve_side(resolved, label, {**env, ENV: value}, work, args.ready_timeout_s, args.fresh)
        if label == "on" and not runs[label]["plugin_on_logged"]:
            print("error: the plugin-on server's log does not say the plugin was on", file=sys.stderr)
            return 1
        kept.write_text(json.dumps(runs[label], indent=2) + "\n")
        (work / "progress.json").unlink(missing_ok=True)
    if set(runs) != {"off", "on"}:
        missing = ({"off", "on"} - set(runs)).pop()
        print(
            f"{args.side}: kept in {args.out / args.side / 'run.json'}; run --side {missing} into the same --out to compare"
        )
        return 0
    cfg = json.loads(
        (Path(local.exported_env(resolved, env)["COOKBOOK"]) / "recipes" / args.recipe / "config.json").read_text()
    )
    lb = json.loads(args.layer_bench.read_text()) if args.layer_bench and args.layer_bench.exists() else None
    result = {
        "recipe": args.recipe,
        "recipe_hash": resolved.content_hash,
        "mode": "together" if args.together else "one after the other",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "greedy": compare(runs["off"]["greedy"], runs["on"]["greedy"]),
        "sweep": {
            c: {
                "off": runs["off"]["sweep"][c],
                "on": runs["on"]["sweep"][c],
                "tok_s_ratio": runs["on"]["sweep"][c]["tok_s"] / runs["off"]["sweep"][c]["tok_s"],
                "tpot_ratio": runs["off"]["sweep"][c]["tpot_ms"] / runs["on"]["sweep"][c]["tpot_ms"],
                "tok_s_ratio_rounds": round_ratios(runs["off"], runs["on"], c),
                "tpot_ratio_rounds": round_ratios(runs["off"], runs["on"], c, "tpot_ms"),
                "stalled_rounds": per_side(runs, c, stalled),
                "compiled_in_rounds": per_side(runs, c, lambda row: row.get("compiled", 0)),
            }
            for c in CONCURRENCIES
        },
        "amdahl_1_stream": amdahl(cfg, runs["off"]["weights_gib"], lb),
        "layer_bench": lb,
        "runs": runs,
    }
    (args.out / "ab.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "| streams | tok/s off | tok/s on | tok/s on/off | TPOT ms off | TPOT ms on | TPOT off/on | TTFT ms off | TTFT ms on |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def spread(rounds: list[float]) -> str:
        return f" ({min(rounds):.2f}-{max(rounds):.2f})" if len(rounds) > 1 else ""

    for c, r in result["sweep"].items():
        lines.append(
            f"| {c} | {r['off']['tok_s']:.1f} | {r['on']['tok_s']:.1f} | {r['tok_s_ratio']:.3f}"
            f"{spread(r['tok_s_ratio_rounds'])} | {r['off']['tpot_ms']:.2f} | {r['on']['tpot_ms']:.2f} | "
            f"{r['tpot_ratio']:.3f}{spread(r['tpot_ratio_rounds'])} | "
            f"{r['off']['ttft_ms']:.0f} | {r['on']['ttft_ms']:.0f} |"
        )
    g = result["greedy"]
    host = host_table(result["sweep"])
    if host:
        lines += ["", "During the timed runs (benchmarks/host_load.py; each the median of its rounds):", "", *host]
    lines.append("")
    if args.together:
        rounds = ", ".join(
            f"{len(runs['off']['rounds'][c])} at {c} stream{'s' if c > 1 else ''}" for c in CONCURRENCIES
        )
        lines.append(
            "Both servers were up at once on the one GPU (8 GiB of KV cache each instead of the recipe's 0.9 "
            "share), measured in turn, the other paused during each run: untimed passes of the sweep on "
            f"each (a concurrency again, up to {WARM_PASSES} passes, while a pass stalls), then rounds "
            f"({rounds}), off and on "
            "alternating (ABBA); each figure is the median of its rounds, and the ratio columns give the "
            "rounds' range."
        )
        for title, key in (
            (f"Rounds with a stall (mean TTFT over {STALL:g}x its median)", "stalled_rounds"),
            (
                "Kernels compiled inside timed rounds (new entries in DeepGEMM's and Triton's caches)",
                "compiled_in_rounds",
            ),
        ):
            counts = {c: r[key] for c, r in result["sweep"].items() if any(r[key].values())}
            listed = ", ".join(f"{c} streams: off {n['off']}, on {n['on']}" for c, n in counts.items())
            lines.append(f"{title}: {listed or 'none'}.")
    lines.append(
        f"Greedy, {g['prompts']} prompts x 32 tokens: {g['identical']} identical, {g['near_ties']} diverge at a "
        f"near-tie (<= {TIE} nats), {len(g['refused'])} otherwise; largest |logprob difference| over the common "
        f"prefix {g['max_abs_logprob_diff_common_prefix']:.4f}."
    )
    if not g["informative"]:
        lines.append(
            f"The comparison could not fail: every position's top 5 lay within {g['top5_spread_nats']:.2g} nats "
            f"(at most the {TIE}-nat tie), the flat logits of random weights, so any divergence would pass as a "
            "near-tie. The plugin's forward against vLLM's (tests/vllm_plugin, on the H200) is the evidence of "
            "equality."
        )
    for side in ("off", "on"):
        late = runs[side].get("compiled_after_ready", [])
        lines.append(
            f"{side}: TileLang compiles after the server was up, per server start: "
            f"{[c['tilelang_compiles'] for c in late]}; kernels vLLM's jit_monitor saw compile during requests: "
            f"{sorted({k for c in late for k in c['jit_monitor_kernels']}) or 'none'}."
        )
    if result["amdahl_1_stream"]:
        a = result["amdahl_1_stream"]
        lines.append(
            f"1 stream: measured {result['sweep'][1]['tok_s_ratio']:.3f}x; Amdahl predicts {a['predicted_gain']:.3f}x "
            f"(MoE share of decode bytes {a['moe_share_of_bytes']:.3f}, kernel {a['kernel_speedup_1_token']:.2f}x "
            "vLLM's MoE at 1 token)."
        )
        gpu = [result["sweep"][1][side].get("gpu_ms_per_token") for side in ("off", "on")]
        if None not in gpu:
            lines.append(
                f"1 stream, the GPU's busy time per token: off {gpu[0]:.3f} ms, on {gpu[1]:.3f} ms, "
                f"{gpu[0] / gpu[1]:.3f}x (the gain a step would see if the host added nothing)."
            )
    (args.out / "ab.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if not g["refused"] else 1


if __name__ == "__main__":
    sys.exit(main())
