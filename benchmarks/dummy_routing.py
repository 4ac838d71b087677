#!/usr/bin/env python3
"""How many of DeepSeek-V4-Flash's 256 routed experts a batch reaches under vLLM's dummy weights.

A model of one bias-routed (`noaux_tc`) MoE layer as vLLM 0.26.0 builds it with --load-format dummy:
every float tensor uniform in [-1e-3, 1e-3] (`initialize_dummy_weights`); the gate's input is an
RMSNorm output (unit RMS times the norm's dummy weight); scores are sqrtsoftplus of the BF16 gate's
float32 logits; each token takes the top 6 of scores + e_score_correction_bias. It counts the distinct
experts a batch of T tokens reaches, with the dummy bias and with the bias at zero (what the plugin's
`balance_dummy_routing` sets). A real checkpoint's bias keeps the load balanced: T tokens then reach
about what uniform routing reaches, 256 * (1 - (1 - 6/256)^T).

    python benchmarks/dummy_routing.py [--tokens 1,4,16,64] [--trials 3]

The shape comes from recipes/dsv4-flash-perf-h200/config.json. CPU only, seconds. It models the
router, not the server: the hidden states are random, which is what sampled tokens' embeddings give
the gate on flat logits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from cookbook.files import repo_root

CONFIG = json.loads((repo_root() / "recipes/dsv4-flash-perf-h200/config.json").read_text())
HIDDEN, EXPERTS, TOP_K = CONFIG["hidden_size"], CONFIG["n_routed_experts"], CONFIG["num_experts_per_tok"]
DUMMY = 1e-3  # vLLM's dummy weights: uniform in [-DUMMY, DUMMY]


def uniform(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=gen) * (2 * DUMMY) - DUMMY


def distinct_experts(tokens: int, seed: int) -> dict[str, int]:
    """Distinct experts T tokens reach in one modelled layer: {"dummy bias": n, "zero bias": n}."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(tokens, HIDDEN, generator=gen) * uniform(gen, HIDDEN)).bfloat16()
    gate = uniform(gen, EXPERTS, HIDDEN).bfloat16()
    scores = torch.sqrt(torch.nn.functional.softplus(x.float() @ gate.float().T))
    biases = {"dummy bias": uniform(gen, EXPERTS), "zero bias": torch.zeros(EXPERTS)}
    return {name: int((scores + b).topk(TOP_K, dim=1).indices.unique().numel()) for name, b in biases.items()}


def uniform_expectation(tokens: int) -> float:
    return EXPERTS * (1 - (1 - TOP_K / EXPERTS) ** tokens)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="1,4,16,64", help="batch sizes, comma-separated")
    ap.add_argument("--trials", type=int, default=3, help="seeds per batch size; the table shows medians")
    args = ap.parse_args(argv)
    print("| tokens | distinct experts, dummy bias | with the bias at zero | uniform routing |")
    print("|---|---|---|---|")
    for t in (int(v) for v in args.tokens.split(",")):
        runs = [distinct_experts(t, seed) for seed in range(args.trials)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {t} | {med['dummy bias']:g} | {med['zero bias']:g} | {uniform_expectation(t):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
