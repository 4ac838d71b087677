#!/usr/bin/env python3
"""Cold start of `cookbook --help` and `cookbook list` next to `python -c pass`, as ratios.

Each command runs N times in a fresh interpreter; the median wall time is reported.
Recipe commands must not import torch or vllm, so the ratio stays small.

    .venv/bin/python benchmarks/cli_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def median_wall(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    py = sys.executable
    cases = [
        ("python -c pass", [py, "-c", "pass"]),
        ("cookbook --help", [py, "-m", "cookbook.cli", "--help"]),
        ("cookbook list", [py, "-m", "cookbook.cli", "list"]),
        ("cookbook launch (first recipe)", None),
    ]
    from cookbook.recipe.resolve import all_slugs, resolve

    slugs = [s for s in all_slugs() if not resolve(s, check=False).recipe.abstract]
    if slugs:
        cases[3] = (f"cookbook launch {slugs[0]}", [py, "-m", "cookbook.cli", "launch", slugs[0]])
    else:
        cases.pop()
    base = None
    print(f"{'command':<40} {'median s':>9} {'x python -c pass':>17}   ({args.runs} runs each)")
    for label, argv in cases:
        t = median_wall(argv, args.runs)
        base = base or t
        print(f"{label:<40} {t:9.3f} {t / base:17.1f}")


if __name__ == "__main__":
    main()
