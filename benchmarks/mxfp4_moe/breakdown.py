"""Where a fused MXFP4 MoE call spends its time, kernel by kernel (CUDA GPU).

Runs the call eagerly under torch.profiler (CUPTI kernel records: device time only, so
launch gaps do not count) over rotating routings, and prints for each of the call's
kernels its mean device time and, for the two expert kernels, the bytes of distinct
experts they read / that time.

    python benchmarks/mxfp4_moe/breakdown.py --variants glm --batches 1,8,64 [--layout frag]
"""

from __future__ import annotations

import argparse
import collections
import sys
from dataclasses import replace

import harness


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="glm")
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--layout", default="frag", choices=("frag", "converter"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--set", default="", help="key:value,... changes to every shipped entry (LaunchConfig fields)")
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from cookbook.kernels.mxfp4_moe import VARIANTS, fused_moe_mxfp4, load_table, moe_workspace, pick
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    change, error = harness.set_and_usage("breakdown", args.set, args.variants.split(","))
    if error:
        print(error, file=sys.stderr)
        return 2
    ws = moe_workspace("cuda")  # as bench and a server call: no counter fill at one token
    for v in args.variants.split(","):
        shape = VARIANTS[v]
        w = harness.make_experts(shape, seed=1)
        if args.layout == "frag":
            w = prepare_experts(*w)
        table = load_table(v)
        table = {b: replace(c, **change) for b, c in table.items()}
        for b in [int(x) for x in args.batches.split(",")]:
            cfg = pick(table, b)
            routs = harness.make_routings(shape, b, harness.ROTATIONS, seed=200 + b)
            x = torch.randn(b, shape.hidden, device="cuda").bfloat16()

            def call(r):
                return fused_moe_mxfp4(
                    x, *w, *routs[r], config=cfg, check_ids=False, scale_max=127, layout=args.layout, workspace=ws
                )

            for r in range(harness.ROTATIONS):
                call(r)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(args.reps):
                    for r in range(harness.ROTATIONS):
                        call(r)
                torch.cuda.synchronize()
            times = collections.defaultdict(float)
            for ev in prof.events():
                if ev.device_type.name == "CUDA":
                    times[ev.name] += ev.device_time
            n = args.reps * harness.ROTATIONS
            distinct = harness.distinct_experts(routs)
            w13_bytes = distinct * shape.w13_bytes()
            w2_bytes = distinct * shape.w2_bytes()
            total = sum(times.values()) / n
            print(f"{v} b={b} layout={args.layout} total device {total:.1f} us  config {cfg}")
            for name, t in sorted(times.items(), key=lambda kv: -kv[1]):
                us = t / n
                extra = ""
                if "w13" in name.lower():
                    extra = f"  {w13_bytes / (us * 1e-6) / 1e12:.2f} TB/s"
                elif "w2" in name.lower():
                    extra = f"  {w2_bytes / (us * 1e-6) / 1e12:.2f} TB/s"
                print(f"  {us:8.1f} us  {name[:60]}{extra}")
        del w
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
