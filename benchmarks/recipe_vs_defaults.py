#!/usr/bin/env python3
"""The recipe's launch against the same engine with vLLM's default flags, in one run.

Starts the server twice on this machine, each time measuring with the recipe's own speed
gate (the same code, prompts and formulas as `cookbook gates run --only speed`):
  1. the recipe's launch block, as `cookbook launch` prints it;
  2. `vllm serve $CHECKPOINT_DIR` with only the flags needed to be reachable and comparable
     (served model name, host, port, max model length for the 8K TTFT probe) and the same env.
Prints output tok/s and median TPOT at each sweep concurrency and uncached TTFT side by
side, as ratios recipe/defaults (TTFT: defaults/recipe, so > 1 means the recipe is faster).

    .venv/bin/python benchmarks/recipe_vs_defaults.py [gemma3-270m-cpu]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from cookbook.recipe.model import Setting
from cookbook.recipe.resolve import resolve
from cookbook.serving import local

KEEP_FOR_DEFAULTS = ("served_model_name", "host", "port", "max_model_len")


def measure(resolved, env, workdir: Path, label: str) -> dict:
    server = local.launch(resolved, env, workdir)
    try:
        local.wait_ready(server, 900)
        out = workdir / "bundle"
        argv = [
            sys.executable,
            "-m",
            "cookbook.cli",
            "gates",
            "run",
            resolved.slug,
            "--only",
            "speed",
            "--base-url",
            server.base_url,
            "--out",
            str(out),
            "--model",
            str(resolved.recipe.serve.arg("served_model_name")),
        ]
        local.step(f"{label}: speed gate")
        subprocess.run(argv, check=False)
        results = json.loads((out / "results.json").read_text())
        return results["gates"]["speed"]["measured"]
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe", nargs="?", default="gemma3-270m-cpu")
    ap.add_argument("--port", type=int, help="serve on this port instead of the recipe's")
    args = ap.parse_args()
    sets = [f"serve.args.port={args.port}"] if args.port else []
    recipe = resolve(args.recipe, sets=sets)
    if recipe.recipe.gates.speed is None:
        sys.exit(f"error: {args.recipe} declares no speed gate; nothing to measure")
    defaults = resolve(args.recipe, sets=sets)
    defaults.recipe.serve.args = {k: v for k, v in recipe.recipe.serve.args.items() if k in KEEP_FOR_DEFAULTS}
    defaults.recipe.serve.args.setdefault("max_model_len", Setting(value=10240))
    figures = {}
    with tempfile.TemporaryDirectory(prefix="recipe-vs-defaults-") as tmp:
        env = local.prepare(recipe, Path(tmp))
        for label, r in (("recipe", recipe), ("defaults", defaults)):
            work = Path(tmp) / label
            work.mkdir()
            figures[label] = measure(r, env, work, label)
    rec, dfl = figures["recipe"], figures["defaults"]
    print(
        f"\n{args.recipe}: recipe launch vs vLLM defaults, same engine, same machine "
        f"({platform.machine()}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores)"
    )
    print(f"{'figure':<34} {'recipe':>10} {'defaults':>10} {'ratio':>8}")

    def row(name, a, b, invert=False):
        if a is None or b is None:
            print(f"{name:<34} {a!s:>10} {b!s:>10} {'n/a':>8}")
            return
        ratio = (b / a) if invert else (a / b)
        print(f"{name:<34} {a:10.2f} {b:10.2f} {ratio:8.2f}x")

    for n in sorted(set(rec.get("ttft_s", {})) & set(dfl.get("ttft_s", {})), key=int):
        row(f"TTFT s, uncached {n}-token prompt", rec["ttft_s"][n], dfl["ttft_s"][n], invert=True)
    sweep_r = {r["concurrency"]: r for r in rec.get("sweep", [])}
    sweep_d = {r["concurrency"]: r for r in dfl.get("sweep", [])}
    for c in sorted(set(sweep_r) & set(sweep_d)):
        row(f"output tok/s @ concurrency {c}", sweep_r[c].get("output_throughput"), sweep_d[c].get("output_throughput"))
        row(
            f"median TPOT ms @ concurrency {c}",
            sweep_r[c].get("median_tpot_ms"),
            sweep_d[c].get("median_tpot_ms"),
            True,
        )


if __name__ == "__main__":
    main()
