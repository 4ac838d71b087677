#!/usr/bin/env python3
"""Why the first sampled request hangs with FlashInfer's sampler: time its first and second call.

vLLM 0.26.0 on CUDA sends top-k/top-p sampling to flashinfer.sampling (unless
VLLM_USE_FLASHINFER_SAMPLER=0). flashinfer-python ships that module as sources: its first use builds
it with ninja and nvcc (flashinfer/jit/core.py: build_and_load, unless an AOT .so from
flashinfer-jit-cache is installed). This script makes the same call vLLM makes on a batch of logits,
twice, in a fresh FlashInfer workspace, and prints both times side by side with what the build left
in the JIT folder.

    python3 benchmarks/flashinfer_sampler_first_call.py [--batch 64] [--vocab 262144]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=262144)
    args = ap.parse_args()
    workspace = Path(tempfile.mkdtemp(prefix="flashinfer-ws-"))
    os.environ["FLASHINFER_WORKSPACE_BASE"] = str(workspace)  # before the import: a clean JIT cache
    import flashinfer
    import torch
    from flashinfer.jit.env import FLASHINFER_JIT_DIR
    from flashinfer.sampling import top_k_top_p_sampling_from_logits

    logits = torch.randn(args.batch, args.vocab, device="cuda", dtype=torch.float32)
    times = []
    for _ in range(2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        top_k_top_p_sampling_from_logits(logits, top_k=50, top_p=0.9)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    built = sorted(p.relative_to(FLASHINFER_JIT_DIR).as_posix() for p in FLASHINFER_JIT_DIR.rglob("*.so"))
    print(f"flashinfer {flashinfer.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    print("| call | seconds | ratio to the second |\n|---|---|---|")
    print(f"| first (builds the module) | {times[0]:.2f} | {times[0] / times[1]:.0f}x |")
    print(f"| second | {times[1]:.4f} | 1x |")
    print(f"JIT-built libraries in {FLASHINFER_JIT_DIR}: {built or 'none'}")


if __name__ == "__main__":
    main()
