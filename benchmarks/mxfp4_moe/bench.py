"""Benchmark (and optionally tune) the fused MXFP4 MoE kernel on a CUDA GPU, in one run.

For each variant and batch size it prints: kernel time (4 launches: align, w13+SiLU, w2,
top-k sum; CUDA-graph replay over rotating routings so no two consecutive calls read the
same experts from L2), effective weight bandwidth = bytes of the MXFP4 experts the call
touches (packed + scales, each distinct expert once) / time, that bandwidth as a share of
the card's copy bandwidth measured in the same run (device-to-device copy, bytes read +
written / time), the PyTorch baseline (per expert: dequantize to BF16, then matmul) and
the speedup over it, and the relative error against a float32 reference.

    python benchmarks/mxfp4_moe/bench.py                     # shipped configs
    python benchmarks/mxfp4_moe/bench.py --tune --out DIR    # sweep, write DIR/<variant>.json
    python benchmarks/mxfp4_moe/bench.py --no-baseline --ab "fused=fuse:true,pdl:true;p2=prefetch:2"
                                    # each named change against the shipped entry, side by side, as ratios
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from harness import (
    ROTATIONS,
    copy_bandwidth,
    distinct_experts,
    event_time,
    graph_time,
    log,
    make_experts,
    make_routings,
    parse_ab,
    read_bandwidth,
    usage_error,
)

BATCHES = [1, 2, 4, 8, 16, 32, 64]
TUNE_BATCHES = [1, 8, 4, 64, 16]  # in order of importance: the budget may stop the sweep early
DECODERS_TUNED = tuple(os.environ.get("MXFP4_MOE_TUNE_DECODERS", "asm").split(","))
# Coordinate sweep from the shipped entry: w13 fields, then w2 fields. Tuples are (block_n, block_k, warps, stages, split); None keeps
# the current value.
W13_CANDIDATES = [
    (None, None, None, None, 1),
    (None, None, None, None, 2),
    (None, None, None, None, 4),
    (None, None, None, None, 8),
    (64, 128, 4, 1, None),
    (64, 256, 4, 1, None),
    (128, 128, 4, 1, None),
    (128, 128, 8, 1, None),
    (128, 256, 8, 1, None),
]
SPLIT_CANDIDATES = {  # --candidates splits: split-K counts only, from the shipped blocks (wave fitting)
    "w13": [(None, None, None, None, n) for n in (1, 2, 3, 4, 5, 6, 8)],
    "w2": [(None, None, None, None, n) for n in (1, 2, 3, 4)],
}
PREFETCH_CANDIDATES = [0, 1, 2]  # L2 prefetch distance (frag layout), tried last on the best blocks
# kernel gluon (one row group per warp): coordinate sweep from GLUON_START, stage by stage
GLUON_START = dict(
    kernel="gluon",
    decoder="asm",
    block_t=8,
    block_n1=64,
    warps1=4,
    block_k1=128,
    block_n2=64,
    warps2=4,
    block_k2=128,
    split1=4,
    split2=1,
    prefetch=1,
    prefetch2=0,
    pdl=False,
    fuse=False,
    stages1=1,
    stages2=1,
    streams=1,
)
GLUON_CANDIDATES = [
    ("w13", [dict(split1=n) for n in (1, 2, 3, 6, 8)] + [dict(block_n1=32, warps1=2), dict(block_n1=128, warps1=8)]),
    ("w2", [dict(split2=n) for n in (2, 3, 4)] + [dict(block_n2=32, warps2=2), dict(block_n2=128, warps2=8)]),
    (
        "taper",
        [dict(taper=True)]
        + [dict(taper=True, split1=n) for n in (3, 4, 6, 8)]
        + [dict(taper=True, split2=n) for n in (2, 3)],
    ),
    ("depth", [dict(prefetch2=2), dict(prefetch=2, prefetch2=1), dict(prefetch=2)]),
    ("block_k", [dict(block_k1=256), dict(block_k2=256), dict(block_k1=256, block_k2=256)]),
    ("block_t", [dict(block_t=16)]),
    ("launch", [dict(pdl=True, fuse=True), dict(pdl=True), dict(fuse=True)]),
    # no align launch, a block per pair (one token's default; measured 1.03-1.09x at 2 tokens, 1.05x dsv4 at 4)
    ("direct", [dict(direct=True), dict(direct=True, pdl=False), dict(direct=True, pdl=True)]),
    # direct and fused calls in 2 parts on 2 streams, each part's launches in the other's ramp and tail (measured
    # 1.04-1.06x glm at 1 token and dsv4 at 2, with more splits than one stream wants)
    (
        "streams",
        [
            dict(streams=2, direct=True, fuse=True, **splits)
            for splits in (
                {},
                dict(split1=3),
                dict(split1=6),
                dict(split2=3),
                dict(split2=4),
                dict(split1=3, split2=3),
                dict(split1=6, split2=4),
            )
        ],
    ),
]
W2_CANDIDATES = [
    (None, None, None, None, 1),
    (None, None, None, None, 2),
    (None, None, None, None, 4),
    (64, 128, 4, 1, None),
    (64, 256, 4, 1, None),
    (128, 128, 4, 1, None),
    (128, 256, 8, 1, None),
]


def sweep_gluon(start, timed, best, best_t, out_of_time):
    """Coordinate sweep of the Gluon kernels' settings: each stage's changes on the best so far."""
    cur, cur_t = start, timed(start)
    for _stage, changes in GLUON_CANDIDATES:
        base = cur
        for change in changes:
            if out_of_time():
                break
            t = timed(replace(base, **change))
            if t < cur_t:
                cur, cur_t = replace(base, **change), t
    return (cur, cur_t) if cur_t < best_t else (best, best_t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="glm,dsv4,k3")
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--tune", action="store_true", help="sweep block sizes; write the best per batch")
    ap.add_argument("--out", type=Path, default=None, help="folder for results JSON and tuned tables")
    ap.add_argument(
        "--budget-s", type=float, default=170.0, help="tuning time for all variants together (shared out evenly)"
    )
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument(
        "--layout",
        default="frag",
        choices=("frag", "converter"),
        help="frag (default): re-arrange the experts once (prepare.prepare_experts, timed apart); "
        "converter: the tensors as the converter writes them",
    )
    ap.add_argument("--prefetch", type=int, default=None, help="override every config's prefetch distance")
    ap.add_argument(
        "--tune-batches",
        default=",".join(map(str, TUNE_BATCHES)),
        help="batch sizes to tune, most important first (a batch not in the table gets an entry)",
    )
    ap.add_argument(
        "--candidates",
        choices=("all", "splits"),
        default="all",
        help="splits: sweep only the split-K counts (and prefetch) from the shipped entries",
    )
    ap.add_argument(
        "--kernel",
        choices=("triton", "gluon"),
        default="triton",
        help="--tune: sweep the Triton frag kernels' blocks (triton) or the Gluon kernels' (gluon, "
        "starting from GLUON_START)",
    )
    ap.add_argument(
        "--ab",
        default="",
        help="NAME=key:value,key:value;NAME2=...: also time each change to the shipped entry and print "
        "its time as a ratio to the shipped one (same run, same routings)",
    )
    ap.add_argument(
        "--no-workspace",
        action="store_true",
        help="call without a workspace (each 1-token call fills its counters first), as the kernels ran before workspaces",
    )
    args = ap.parse_args()
    try:
        ab = parse_ab(args.ab)
    except ValueError as exc:
        print(f"bench: --ab: {exc}", file=sys.stderr)
        return 2

    import torch
    import triton

    from cookbook.kernels.mxfp4_moe import VARIANTS, fused_moe_mxfp4, load_table, moe_workspace, pick
    from cookbook.kernels.mxfp4_moe.config import table_json
    from cookbook.kernels.mxfp4_moe.reference import moe_torch, rel_error

    variants = args.variants.split(",")
    error = usage_error("bench", variants)
    if error:
        print(error, file=sys.stderr)
        return 2
    batches = [int(b) for b in args.batches.split(",")]
    t_start = time.time()
    dev = torch.cuda.get_device_properties(0)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = {
        "layout": args.layout,
        "date": stamp,
        "device": dev.name,
        "sms": dev.multi_processor_count,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "command": "python benchmarks/mxfp4_moe/bench.py " + " ".join(sys.argv[1:]),
    }
    log(f"# {meta}")
    copy_bw = copy_bandwidth()
    log(f"copy bandwidth (device-to-device, read+write): {copy_bw / 1e12:.2f} TB/s")
    read_bw = read_bandwidth()
    log(f"read bandwidth (streaming read only, for context): {read_bw / 1e12:.2f} TB/s")
    results = {"meta": meta, "copy_bw_Bps": copy_bw, "read_bw_Bps": read_bw, "rows": [], "tuning": {}}
    tune_spent = [0.0]

    def run_variant(v):
        shape = VARIANTS[v]
        torch.cuda.empty_cache()
        w = make_experts(shape, seed=1)
        w_conv = w
        scale_max = max(int(w[1].max()), int(w[3].max()))
        if args.layout == "frag":  # one-time prepare step, MXFP4-sized output
            from cookbook.kernels.mxfp4_moe.prepare import prepare_experts

            torch.cuda.synchronize()
            t0 = time.perf_counter()
            w = prepare_experts(*w)
            torch.cuda.synchronize()
            prep_s = time.perf_counter() - t0
            size = sum(a.numel() for a in w)
            results.setdefault("prepare", {})[v] = {"s": prep_s, "bytes": size}
            log(
                f"{v}: prepare (frag layout, all {shape.experts} experts) {prep_s:.2f} s, "
                f"{size / 1e9:.2f} GB uint8 out (the same size as in)"
            )
        table = load_table(v)
        if args.prefetch is not None:
            table = {b: replace(c, prefetch=args.prefetch) for b, c in table.items()}
        per_expert = shape.expert_bytes()

        ws = None if args.no_workspace else moe_workspace("cuda")  # as a server holds one per device

        def runner(cfg, routs, x):
            def fn(r):
                wts, ids = routs[r]
                return fused_moe_mxfp4(
                    x, *w, wts, ids, config=cfg, check_ids=False, scale_max=scale_max, layout=args.layout, workspace=ws
                )

            return fn

        if args.tune:
            tuned = dict(table)
            # the tuning time left, shared out over the variants left (later ones reuse compiled kernels)
            v_start = time.time()
            v_budget = (args.budget_s - tune_spent[0]) / (len(variants) - variants.index(v))
            for b in [int(x) for x in args.tune_batches.split(",")]:
                if time.time() - v_start > v_budget:
                    log(f"  tuning budget spent; {v} batch {b} keeps its shipped config")
                    continue
                routs = make_routings(shape, b, ROTATIONS, seed=100 + b)
                x = torch.randn(b, shape.hidden, device="cuda").bfloat16()
                tried = []

                def timed(cfg):
                    try:
                        t = graph_time(runner(cfg, routs, x), ROTATIONS, replays=10)
                    except Exception as exc:  # a config that does not compile or launch
                        tried.append({**asdict(cfg), "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
                        log(f"    {asdict(cfg)} failed: {type(exc).__name__}: {str(exc)[:120]}")
                        return float("inf")
                    tried.append({**asdict(cfg), "us": t * 1e6})
                    return t

                shipped = pick(table, b)
                best, best_t = shipped, timed(shipped)
                log(f"  {v} batch {b} shipped: {best_t * 1e6:.1f} us")
                if args.kernel == "gluon":
                    # one token starts direct (no align launch: measured 1.01-1.08x at one token); the last stage tries it
                    best, best_t = sweep_gluon(
                        replace(shipped, **GLUON_START, direct=b == 1),
                        timed,
                        best,
                        best_t,
                        lambda: time.time() - v_start > v_budget,
                    )
                for dec in DECODERS_TUNED if args.kernel == "triton" else ():
                    cands = []
                    lists = (
                        (("w13", SPLIT_CANDIDATES["w13"]), ("w2", SPLIT_CANDIDATES["w2"]))
                        if args.candidates == "splits"
                        else (("w13", W13_CANDIDATES), ("w2", W2_CANDIDATES))
                    )
                    for stage, lst in lists:
                        for c in lst:
                            cands.append((stage, c))
                    cands += [("prefetch", (d,)) for d in PREFETCH_CANDIDATES]
                    for stage, c in cands:
                        if time.time() - v_start > v_budget:
                            break
                        base = replace(best, decoder=dec)
                        keys = {
                            "w13": ("block_n1", "block_k1", "warps1", "stages1", "split1"),
                            "w2": ("block_n2", "block_k2", "warps2", "stages2", "split2"),
                            "prefetch": ("prefetch",),
                        }[stage]
                        cfg = replace(base, **{k: val for k, val in zip(keys, c) if val is not None})
                        if shape.hidden % cfg.block_k1 or shape.intermediate % cfg.block_k2 or cfg == best:
                            continue
                        t = timed(cfg)
                        if t < best_t:
                            best, best_t = cfg, t
                tuned[b] = best
                results["tuning"][f"{v}/{b}"] = tried
                log(f"  tried {len(tried)} configs")
                log(f"  tuned {v} batch {b}: {best_t * 1e6:.1f} us  {asdict(best)}")
            tune_spent[0] += time.time() - v_start
            table = tuned
            if args.out:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / f"{v}.json").write_text(table_json(v, table, {"tuned": f"{dev.name}, {stamp}"}))

        for b in batches:
            cfg = pick(table, b)
            routs = make_routings(shape, b, ROTATIONS, seed=200 + b)
            x = torch.randn(b, shape.hidden, device="cuda").bfloat16()
            t = graph_time(runner(cfg, routs, x), ROTATIONS)
            distinct = distinct_experts(routs)
            nbytes = distinct * per_expert
            row = {
                "variant": v,
                "batch": b,
                "us": t * 1e6,
                "experts": distinct,
                "GB": nbytes / 1e9,
                "TBps": nbytes / t / 1e12,
                "copy_frac": nbytes / t / copy_bw,
                "config": asdict(cfg),
            }
            wts, ids = routs[0]
            out = fused_moe_mxfp4(x, *w, wts, ids, config=cfg, scale_max=scale_max, layout=args.layout)
            if b in (1, 8, 64):
                ref = moe_torch(x, *w_conv, wts, ids)
                row["rel_err"] = rel_error(out.float().cpu().numpy(), ref.cpu().numpy())
            if not args.no_baseline:
                tb = event_time(lambda: moe_torch(x, *w_conv, wts, ids, dtype=torch.bfloat16))
                nb = len(torch.unique(ids)) * per_expert
                row.update(base_us=tb * 1e6, base_TBps=nb / tb / 1e12, speedup=(nbytes / t) / (nb / tb))
            for name, change in ab:
                try:
                    ta = graph_time(runner(replace(cfg, **change), routs, x), ROTATIONS)
                except Exception as exc:  # a change this entry cannot take: say so, go on
                    log(f"      {name:>12s}: not run ({type(exc).__name__}: {str(exc)[:160]})")
                    continue
                row.setdefault("ab", {})[name] = {"us": ta * 1e6, "copy_frac": nbytes / ta / copy_bw, "speedup": t / ta}
                log(f"      {name:>12s}: {ta * 1e6:9.1f} us  {100 * nbytes / ta / copy_bw:4.1f}% copy  x{t / ta:.3f}")
            results["rows"].append(row)
            log(
                f"{v:5s} b={b:3d} {t * 1e6:9.1f} us  {distinct:6.1f} exp {nbytes / 1e9:6.3f} GB "
                f"{nbytes / t / 1e12:5.2f} TB/s ({100 * nbytes / t / copy_bw:4.1f}% copy)"
                + (
                    f"  base {row['base_us'] / 1e3:8.2f} ms ({row['base_TBps']:.3f} TB/s) x{row['speedup']:.0f}"
                    if "base_us" in row
                    else ""
                )
                + (f"  err {row['rel_err']:.1e}" if "rel_err" in row else "")
            )
        del w, w_conv

    def print_summary():
        log(f"\ncopy bandwidth {copy_bw / 1e12:.2f} TB/s; {dev.name}; {stamp}")
        log(
            f"{'variant':7s} {'batch':>5s} {'us':>9s} {'TB/s':>6s} {'%copy':>6s} {'base TB/s':>9s} {'speedup':>8s} {'rel_err':>8s}"
        )
        for r in results["rows"]:
            log(
                f"{r['variant']:7s} {r['batch']:5d} {r['us']:9.1f} {r['TBps']:6.2f} {100 * r['copy_frac']:6.1f} "
                f"{r.get('base_TBps', float('nan')):9.3f} {r.get('speedup', float('nan')):8.0f} "
                f"{r.get('rel_err', float('nan')):8.1e}"
            )

    for v in variants:
        try:
            run_variant(v)
        except Exception:  # report and go on with the next variant
            import traceback

            traceback.print_exc()
            log(f"{v}: FAILED (traceback above)")
        torch.cuda.empty_cache()
    print_summary()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench.json").write_text(json.dumps(results, indent=1))
    log(f"total {time.time() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
