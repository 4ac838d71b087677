#!/usr/bin/env python3
"""The CPU recipe against llama.cpp's own llama-server and against vLLM at default flags.

Three servers, started one at a time on this machine, each measured by the same client
(`vllm bench serve`, the pinned engine's own benchmark; benchmarks/speed_gate_vs_vllm_bench.py
shows that the speed gate agrees with it) on the same prompts: the speed gate's workload
(passages of the built-in prose with unique suffixes, greedy, --ignore-eos, 128 tokens),
at concurrency 1, 4, 8 and 16:

  recipe     the recipe's launch block, as `cookbook launch` prints it (the bf16 HF
             checkpoint converted from the GGUF);
  defaults   `vllm serve $CHECKPOINT_DIR` with only served name, host, port and max model
             length, and the same env;
  llama.cpp  llama-server (scripts/build-llama-server) on the same Q4_K_M GGUF, with the
             flags that suit this load: one slot per stream (-np 16, continuous batching),
             threads = cores for decode and batch, a context of 1024 tokens per slot.

Prints output tok/s, median TTFT and median TPOT per server and level, and the ratios
recipe/llama.cpp and recipe/defaults (TTFT and TPOT: other/recipe, so > 1 means the recipe
is faster). Writes vllm bench's JSON per server and level, the table and the load average
to --out (default .cache/bench/cpu-vs-llamacpp-<time>/).

    .venv/bin/python benchmarks/cpu_vs_llamacpp.py [--servers recipe defaults llama.cpp] [--concurrencies 1 4 8 16]
        [--set KEY=VALUE ...]   (a variant of the recipe's server, e.g. --set env.VLLM_CPU_OMP_THREADS_BIND=0-1)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path

from speed_gate_vs_vllm_bench import run_vllm_bench

from cookbook.gates import speed
from cookbook.recipe.model import Setting
from cookbook.recipe.paths import repo_root
from cookbook.recipe.resolve import resolve
from cookbook.serving import local

KEEP_FOR_DEFAULTS = ("served_model_name", "host", "port", "max_model_len")
SERVERS = ("recipe", "defaults", "llama.cpp")
FIGURES = ("output_throughput", "median_ttft_ms", "median_tpot_ms")


def llama_server(gguf: Path, model: str, port: int, slots: int, workdir: Path) -> local.Server:
    binary = subprocess.run(
        [str(repo_root() / "scripts" / "build-llama-server")], check=True, capture_output=True, text=True
    ).stdout.strip()
    threads = str(os.cpu_count() or 1)
    argv = [binary, "-m", str(gguf), "--alias", model, "--host", "127.0.0.1", "--port", str(port)]
    argv += ["-np", str(slots), "-cb", "-c", str(1024 * slots), "-t", threads, "-tb", threads, "--no-webui"]
    log = workdir / "llama-server.log"
    local.step(f"launch: {local.quote_cmd(argv)}  (log: {log})")
    proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    return local.Server(proc, log, f"http://127.0.0.1:{port}")


def identical(x: dict, y: dict) -> int:
    """Requests whose generated text is the same in two vllm bench runs of the same prompts (in order)."""
    return sum(a == b for a, b in zip(x.get("generated_texts") or [], y.get("generated_texts") or []))


def ratio(a, b):
    return round(a / b, 2) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe", nargs="?", default="gemma3-270m-cpu")
    ap.add_argument("--servers", nargs="+", choices=SERVERS, default=list(SERVERS))
    ap.add_argument("--concurrencies", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--requests", type=int, default=32, help="requests per level (at least the concurrency)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="KEY=VALUE for the recipe's server")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE;KEY=VALUE",
        help="also measure the recipe with these sets, as server NAME (tuning experiments)",
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    recipe = resolve(args.recipe, sets=args.sets)
    cfg = recipe.recipe.gates.speed
    if cfg is None:
        sys.exit(f"error: {args.recipe} declares no speed gate, whose workload this benchmark uses")
    cfg = cfg.model_copy(update={"sweep_concurrencies": args.concurrencies, "sweep_requests": args.requests})
    defaults = resolve(args.recipe)
    defaults.recipe.serve.args = {k: v for k, v in recipe.recipe.serve.args.items() if k in KEEP_FOR_DEFAULTS}
    defaults.recipe.serve.args.setdefault("max_model_len", Setting(value=10240))
    variants = {}
    for v in args.variant:
        name, _, sets = v.partition(":")
        variants[name] = resolve(args.recipe, sets=args.sets + [x for x in sets.split(";") if x])
    servers = args.servers + list(variants)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or repo_root() / ".cache" / "bench" / f"cpu-vs-llamacpp-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    model = str(recipe.recipe.serve.arg("served_model_name"))
    env = local.prepare(recipe, out)
    exported = local.exported_env(recipe, env)
    tokenizer, gguf = exported["CHECKPOINT_DIR"], Path(env["SOURCE_FILE"])
    port = int(recipe.recipe.serve.arg("port", 8000))
    prompts = speed.workload_prompts(cfg, uuid.uuid4().hex[:12])  # the same prompts for every server
    results: dict[str, dict[int, dict]] = {}
    loads: dict[str, list[str]] = {}
    for name in servers:
        work = out / name.replace(".", "")
        work.mkdir(exist_ok=True)
        if name == "llama.cpp":
            server = llama_server(gguf, model, port, max(args.concurrencies), work)
        else:
            server = local.launch(variants.get(name) or (recipe if name == "recipe" else defaults), env, work)
        try:
            local.wait_ready(server, 900)
            local.step(f"{name}: warm-up")
            run_vllm_bench(server.base_url, model, tokenizer, prompts[args.concurrencies[0]][:2], 1, 16, work)
            loads[name] = Path("/proc/loadavg").read_text().split()[:3]
            results[name] = {}
            for c in args.concurrencies:
                local.step(f"{name}: concurrency {c} ({len(prompts[c])} requests)")
                results[name][c] = run_vllm_bench(
                    server.base_url, model, tokenizer, prompts[c], c, cfg.sweep_max_tokens, work
                )
        finally:
            server.stop()

    head = ["concurrency"] + [f"{s} {f}" for s in servers for f in ("tok/s", "TTFT ms", "TPOT ms")]
    ratios = [("recipe", "llama.cpp"), ("recipe", "defaults")]
    ratios = [(a, b) for a, b in ratios if a in results and b in results]
    head += [f"{a}/{b} tok/s" for a, b in ratios] + [f"{b}/{a} TPOT" for a, b in ratios]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in args.concurrencies:
        row = [str(c)]
        for s in servers:
            row += [f"{results[s][c].get(f, 0):.1f}" for f in FIGURES]
        row += [str(ratio(results[a][c]["output_throughput"], results[b][c]["output_throughput"])) for a, b in ratios]
        row += [str(ratio(results[b][c]["median_tpot_ms"], results[a][c]["median_tpot_ms"])) for a, b in ratios]
        lines.append("| " + " | ".join(row) + " |")
    # Speculation is lossless when greedy outputs match vLLM without it, prompt by prompt; the
    # remaining differences come from bf16 numerics under different batch shapes.
    same = {}
    for a, b in [("recipe", "defaults")] + [(v, "defaults") for v in variants]:
        if a in results and b in results:
            same[f"{a} vs {b}"] = {str(c): identical(results[a][c], results[b][c]) for c in args.concurrencies}
    for k, v in same.items():
        lines.append(
            f"\nidentical greedy outputs, {k}: " + ", ".join(f"{n}/{len(prompts[int(c)])} at {c}" for c, n in v.items())
        )
    summary = {
        "identical_greedy_outputs": same,
        "recipe": recipe.slug,
        "recipe_sets": args.sets,
        "variants": args.variant,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "loadavg_before_each_server": loads,
        "requests_per_level": args.requests,
        "max_tokens": cfg.sweep_max_tokens,
        "figures": {s: {str(c): {f: r.get(f) for f in FIGURES} for c, r in v.items()} for s, v in results.items()},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nload average before each server: {loads}\nwritten to {out}")


if __name__ == "__main__":
    main()
