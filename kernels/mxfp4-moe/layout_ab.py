#!/usr/bin/env python3
"""Side-by-side timing of the frag layout with row groups interleaved (Gluon kernels, CUDA GPU).

For each variant and batch size: the shipped table entry (plus --set changes) timed on the plain
frag layout and on the same experts prepared with `prepare_experts(..., interleave=G)` for each G,
in one process (CUDA-graph replay over rotating routings, as bench.py), as ratios; the outputs of
every layout must equal the plain layout's bit for bit.

    python3 kernels/mxfp4-moe/layout_ab.py --variants glm,dsv4,k3 --batches 1,2,4,8 --interleave 4,8
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="glm,dsv4,k3")
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument("--interleave", default="4,8", help="row-group interleaves to compare with 1")
    ap.add_argument("--set", default="", help="key:value,... changes to every shipped entry (LaunchConfig fields)")
    args = ap.parse_args()

    import torch

    import bench
    from cookbook.kernels.mxfp4_moe import VARIANTS, fused_moe_mxfp4, load_table, pick
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    if not torch.cuda.is_available():
        print("layout_ab.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    gs = [1] + [int(g) for g in args.interleave.split(",")]
    change = dict(bench.parse_ab(f"set={args.set}")[0][1]) if args.set else {}
    print(f"# {torch.cuda.get_device_name()}  copy bandwidth {bench.copy_bandwidth() / 1e12:.2f} TB/s", flush=True)
    for v in args.variants.split(","):
        shape = VARIANTS[v]
        raw = bench.make_experts(shape, seed=1)
        prepared = {g: prepare_experts(*raw, interleave=g) for g in gs}
        del raw
        table = load_table(v)
        for b in [int(x) for x in args.batches.split(",")]:
            cfg = replace(pick(table, b), **change)
            routs = bench.make_routings(shape, b, bench.ROTATIONS, seed=200 + b)
            x = torch.randn(b, shape.hidden, device="cuda").bfloat16()

            def runner(g):
                def fn(r):
                    wts, ids = routs[r]
                    return fused_moe_mxfp4(x, *prepared[g], wts, ids, config=cfg, check_ids=False, scale_max=127,
                                           layout="frag", interleave=g)
                return fn
            outs = {g: runner(g)(0) for g in gs}
            for g in gs[1:]:
                if not torch.equal(outs[g].view(torch.int16), outs[1].view(torch.int16)):
                    print(f"{v} b={b}: interleave {g} output differs from the plain layout", file=sys.stderr)
                    return 1
            times = {g: [] for g in gs}
            for _ in range(2):          # alternate, so drift during the run falls on every layout alike
                for g in gs:
                    times[g].append(bench.graph_time(runner(g), bench.ROTATIONS))
            base = min(times[1])
            row = "  ".join(f"G{g} {min(t) * 1e6:7.1f} us x{base / min(t):.3f}" for g, t in times.items())
            print(f"{v:5s} b={b:3d}  {row}", flush=True)
        del prepared
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
