"""How fast a plain read of the bytes a decode MoE call reads can be, next to the kernels (CUDA GPU).

For each variant and batch size: the fused MXFP4 MoE call (shipped table, bench's timing:
CUDA-graph replay rotating over 8 routings), then a streaming read of the same bytes, in one
launch and in two dependent launches (the w13 bytes, then the w2 bytes: the call's own
dependency), rotating over 8 buffers so that L2 holds none of them. The read kernel does no work
but an XOR per program; its best over a few program sizes is printed. All as % of the copy
bandwidth measured in the same run: the two-launch read is about as fast as anything that reads
w13 before w2 in two launches can be.

    python benchmarks/mxfp4_moe/ceiling.py --variants glm,dsv4,k3 --batches 1,2,8
"""

from __future__ import annotations

import argparse
import sys

import harness

READ_SHAPES = [(1 << 15, 4), (1 << 16, 4), (1 << 16, 8), (1 << 17, 8)]  # (bytes per program, warps)


def read_launches(buf, parts: list[int], per_program: int, warps: int, kernel):
    """A function that reads buf in len(parts) launches, part j being parts[j] bytes (multiples of 4)."""
    import torch

    n_per = per_program // 4
    views, off = [], 0
    for nbytes in parts:
        views.append(buf[off // 4 : (off + nbytes) // 4])
        off += nbytes
    outs = [torch.empty(-(-v.numel() // n_per), dtype=torch.int32, device=buf.device) for v in views]

    def run():
        for v, o in zip(views, outs):
            kernel[(o.numel(),)](v, o, v.numel(), n_per=n_per, num_warps=warps)

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="glm,dsv4,k3")
    ap.add_argument("--batches", default="1,2,8")
    args = ap.parse_args()

    import torch

    from cookbook.kernels.mxfp4_moe import VARIANTS, fused_moe_mxfp4, load_table, moe_workspace, pick
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    error = harness.usage_error("ceiling", args.variants.split(","))
    if error:
        print(error, file=sys.stderr)
        return 2
    copy_bw = harness.copy_bandwidth()
    print(
        f"copy bandwidth (device-to-device, read+write): {copy_bw / 1e12:.2f} TB/s; {torch.cuda.get_device_name()}",
        flush=True,
    )
    kernel = harness.read_kernel()
    print(
        f"{'variant':8s} {'tokens':>6s} {'MB':>7s} | {'kernel us':>9s} {'%copy':>6s} | {'read, 1 launch':>14s} "
        f"{'%copy':>6s} | {'read, 2 launches':>16s} {'%copy':>6s} | kernel / 2-launch read"
    )
    ws = moe_workspace("cuda")  # as bench and a server call: no counter fill at one token
    for v in args.variants.split(","):
        shape = VARIANTS[v]
        w = prepare_experts(*harness.make_experts(shape, seed=1))
        h = shape.hidden
        for nt in [int(x) for x in args.batches.split(",")]:
            cfg = pick(load_table(v), nt)
            routs = harness.make_routings(shape, nt, harness.ROTATIONS, seed=200 + nt)
            x = torch.randn(nt, h, device="cuda").bfloat16()

            def call(r):
                return fused_moe_mxfp4(
                    x, *w, *routs[r], config=cfg, check_ids=False, scale_max=127, layout="frag", workspace=ws
                )

            t_kernel = harness.graph_time(call, harness.ROTATIONS)
            distinct = harness.distinct_experts(routs)
            b13, b2 = int(distinct * shape.w13_bytes()) // 4 * 4, int(distinct * shape.w2_bytes()) // 4 * 4
            bufs = [torch.ones((b13 + b2) // 4, dtype=torch.int32, device="cuda") for _ in range(harness.ROTATIONS)]
            best = {}
            for parts in ([b13 + b2], [b13, b2]):
                for per_program, warps in READ_SHAPES:
                    runs = [read_launches(buf, parts, per_program, warps, kernel) for buf in bufs]
                    t = harness.graph_time(lambda r: runs[r](), harness.ROTATIONS)
                    best[len(parts)] = min(best.get(len(parts), float("inf")), t)
            del bufs
            nbytes = b13 + b2

            def pct(t):
                return 100 * nbytes / t / copy_bw

            print(
                f"{v:8s} {nt:6d} {nbytes / 1e6:7.1f} | {t_kernel * 1e6:9.1f} {pct(t_kernel):6.1f} | "
                f"{best[1] * 1e6:11.1f} us {pct(best[1]):6.1f} | {best[2] * 1e6:13.1f} us {pct(best[2]):6.1f} | "
                f"{best[2] / t_kernel:.3f}",
                flush=True,
            )
        w = None  # free the experts before the next variant
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
