"""When each program of the Gluon expert kernels runs, and what the call reads over time (CUDA GPU).

The kernels are built with TRACE: every program stores its start and end (the GPU's global
nanosecond clock) and its SM. The call is replayed from CUDA graphs, as in bench, rotating
over 8 routings; the last replay of each is read back. Printed per kernel (means over the
routings, µs from the first w13 program's start): first and last start, first, median and last
end, program durations and the time after the K loop (stores, fused epilogue), programs per SM
at once; then the weight bandwidth over time, each program's bytes spread evenly over its K
loop, in bins of --bin-us, and the share of the call spent below 3 TB/s.

    python benchmarks/mxfp4_moe/timeline.py --variants glm,dsv4 --batches 1,8 [--set key:value,...]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import harness

from cookbook.kernels.mxfp4_moe.shapes import mxfp4_bytes


def split_start(steps: int, j: int, split: int, taper: bool) -> int:
    """First K step of split j: the Gluon kernels' own `_split_start`, run on the host (plain
    integer arithmetic), so the bytes counted here are the ones the kernels read."""
    from cookbook.kernels.mxfp4_moe.gluon_kernels import _split_start

    return _split_start.fn(steps, j, split, taper)


def program_bytes(
    n_programs: int, grid: tuple, rows: int, k_total: int, block_k: int, split: int, taper: bool, active_blocks: int
) -> list[int]:
    """Weight bytes (packed + scales) each program of a (block, row tile, split) grid reads."""
    steps = k_total // block_k
    out = []
    for pid in range(n_programs):
        b, sk = pid // (grid[1] * grid[2]), pid % grid[2]
        k = (split_start(steps, sk + 1, split, taper) - split_start(steps, sk, split, taper)) * block_k
        out.append(mxfp4_bytes(rows * k) if b < active_blocks else 0)
    return out


def summarize(name: str, tr, t0: int) -> dict:
    """Columns of a trace: start, end of the K loop (0: the program had no tile), end, SM."""
    start, end = (tr[:, 0] - t0) / 1e3, (tr[:, 2] - t0) / 1e3
    dur = end - start
    looped = tr[:, 1] > 0
    after = (tr[looped, 2] - tr[looped, 1]) / 1e3  # stores and fused epilogue, after the K loop
    return {
        "kernel": name,
        "first_start": start.min(),
        "last_start": start.max(),
        "first_end": end.min(),
        "median_end": end.median(),
        "last_end": end.max(),
        "dur_min": dur.min(),
        "dur_median": dur.median(),
        "dur_max": dur.max(),
        "after_median": after.median(),
        "after_max": after.max(),
        "programs": len(tr),
    }


def max_per_sm(tr) -> int:
    """Most programs running at once on one SM."""
    best = 0
    for sm in tr[:, 3].unique():
        rows = tr[tr[:, 3] == sm]
        ev = sorted([(int(s), 1) for s in rows[:, 0]] + [(int(e), -1) for e in rows[:, 2]], key=lambda x: (x[0], x[1]))
        cur = 0
        for _, d in ev:
            cur += d
            best = max(best, cur)
    return best


def bandwidth_bins(spans, bin_us: float, t_end: float):
    """TB/s per bin: each (start_us, end_us, bytes) spread evenly over its span."""
    import math

    n = max(1, math.ceil(t_end / bin_us))
    bins = [0.0] * n
    for s, e, nbytes in spans:
        if nbytes == 0 or e <= s:
            continue
        rate = nbytes / (e - s)  # bytes per µs
        i = int(s // bin_us)
        while i < n and i * bin_us < e:
            lo, hi = max(s, i * bin_us), min(e, (i + 1) * bin_us)
            bins[i] += rate * max(0.0, hi - lo)
            i += 1
    return [b / bin_us / 1e6 for b in bins]  # bytes/µs -> TB/s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="glm,dsv4")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--set", default="", help="key:value,... changes to every shipped entry (LaunchConfig fields)")
    ap.add_argument("--bin-us", type=float, default=2.0)
    ap.add_argument("--dump", type=Path, help="also save the raw traces, one torch file per variant and batch")
    args = ap.parse_args()

    import torch

    from cookbook.kernels.mxfp4_moe import VARIANTS, fused_moe_mxfp4, load_table, moe_workspace, pick
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

    change, error = harness.set_and_usage("timeline", args.set, args.variants.split(","))
    if error:
        print(error, file=sys.stderr)
        return 2
    ws = moe_workspace("cuda")  # as bench and a server call: no counter fill at one token
    for v in args.variants.split(","):
        shape = VARIANTS[v]
        w = prepare_experts(*harness.make_experts(shape, seed=1))
        h, i, k = shape.hidden, shape.intermediate, shape.top_k
        for nt in [int(x) for x in args.batches.split(",")]:
            cfg = replace(pick(load_table(v), nt), **change)
            if cfg.kernel != "gluon":
                print(f"{v} b={nt}: kernel {cfg.kernel!r} has no trace (Gluon only)")
                continue
            if cfg.streams > 1:
                print(
                    f"{v} b={nt}: the entry runs on {cfg.streams} streams; a traced call runs on one (one launch per kernel)"
                )
            routs = harness.make_routings(shape, nt, harness.ROTATIONS, seed=200 + nt)
            x = torch.randn(nt, h, device="cuda").bfloat16()
            graphs, traces = [], []
            for r in range(harness.ROTATIONS):
                fused_moe_mxfp4(
                    x, *w, *routs[r], config=cfg, check_ids=False, scale_max=127, layout="frag", workspace=ws, trace={}
                )  # compiles the traced kernels outside the capture
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                tr = {}
                with torch.cuda.graph(g):
                    fused_moe_mxfp4(
                        x,
                        *w,
                        *routs[r],
                        config=cfg,
                        check_ids=False,
                        scale_max=127,
                        layout="frag",
                        workspace=ws,
                        trace=tr,
                    )
                graphs.append(g)
                traces.append(tr)
            for _ in range(3):
                for g in graphs:
                    g.replay()
            torch.cuda.synchronize()
            rows, all_bins, spans_total, dumps = [], [], 0.0, []
            for r, tr in enumerate(traces):
                w13, w2 = tr["w13"].cpu(), tr["w2"].cpu()
                t0 = int(w13[:, 0].min())
                ids = routs[r][1]
                direct = cfg.direct and nt == 1
                p = nt * k
                # blocks that read an expert: one per pair (direct) or align's count (per expert, by block_t)
                counts = torch.bincount(ids.reshape(-1).cpu(), minlength=shape.experts)
                active = p if direct else int(((counts + cfg.block_t - 1) // cfg.block_t).sum())
                split1 = min(cfg.split1, h // cfg.block_k1)
                split2 = min(cfg.split2, i // cfg.block_k2)
                g1 = (len(w13) // (i // cfg.block_n1 * split1), i // cfg.block_n1, split1)
                g2 = (len(w2) // (h // cfg.block_n2 * split2), h // cfg.block_n2, split2)
                b13 = program_bytes(len(w13), g1, 2 * cfg.block_n1, h, cfg.block_k1, split1, cfg.taper, active)
                b2 = program_bytes(len(w2), g2, cfg.block_n2, i, cfg.block_k2, split2, cfg.taper, active)
                # bytes spread over the K loop (start .. loop end)
                spans = [((a - t0) / 1e3, (le - t0) / 1e3, n) for (a, le, _, _), n in zip(w13.tolist(), b13)]
                spans += [((a - t0) / 1e3, (le - t0) / 1e3, n) for (a, le, _, _), n in zip(w2.tolist(), b2)]
                if args.dump:
                    dumps.append({"w13": w13, "w2": w2, "bytes13": b13, "bytes2": b2, "grid1": g1, "grid2": g2})
                rows.append(
                    (
                        summarize("w13", w13, t0),
                        summarize("w2", w2, t0),
                        max_per_sm(w13),
                        max_per_sm(w2),
                        (sum(b13) + sum(b2)) / 1e6,
                    )
                )
                t_end = (int(max(w13[:, 2].max(), w2[:, 2].max())) - t0) / 1e3
                spans_total += t_end
                all_bins.append(bandwidth_bins(spans, args.bin_us, t_end))
            n = len(rows)
            print(f"{v} b={nt}: config {cfg}")
            print(
                f"  globaltimer step seen: {min_step(traces)} ns;  MB read per call {sum(r[4] for r in rows) / n:.1f};"
                f"  first w13 start -> last w2 end {spans_total / n:.1f} us (mean of {n} routings)"
            )
            for j, label in ((0, "w13"), (1, "w2")):
                m = {key: sum(float(r[j][key]) for r in rows) / n for key in rows[0][j] if key != "kernel"}
                per_sm = max(r[2 + j] for r in rows)
                print(
                    f"  {label:4s} programs {int(m['programs'])}, at most {per_sm} per SM at once; starts "
                    f"{m['first_start']:.1f}..{m['last_start']:.1f} us, ends {m['first_end']:.1f} / median "
                    f"{m['median_end']:.1f} / last {m['last_end']:.1f} us; program runs {m['dur_min']:.1f} / "
                    f"{m['dur_median']:.1f} / {m['dur_max']:.1f} us (min / median / max), after its K loop "
                    f"{m['after_median']:.2f} / {m['after_max']:.2f} us (median / max)"
                )
            width = max(len(b) for b in all_bins)
            mean = [sum(b[q] for b in all_bins if q < len(b)) / n for q in range(width)]
            print(f"  TB/s per {args.bin_us:g} us: " + " ".join(f"{x:.2f}" for x in mean))
            low = sum(1 for x in mean if x < 3.0) * args.bin_us
            print(f"  bins below 3 TB/s: {low:.0f} us of {width * args.bin_us:.0f}")
            if args.dump:
                args.dump.mkdir(parents=True, exist_ok=True)
                torch.save({"config": str(cfg), "runs": dumps}, args.dump / f"{v}-{nt}.pt")
        del w
        torch.cuda.empty_cache()
    return 0


def min_step(traces) -> int:
    """The smallest positive difference between the recorded clock values: the clock's resolution."""
    import torch

    vals = torch.cat([t[n][:, [0, 2]].reshape(-1).cpu() for t in traces for n in ("w13", "w2")]).unique()
    d = vals[1:] - vals[:-1]
    return int(d[d > 0].min()) if len(d) else 0


if __name__ == "__main__":
    sys.exit(main())
