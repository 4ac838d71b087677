"""Same shapes, same weights, same routing: this kernel against vLLM 0.26.0's Triton MXFP4 MoE kernels.

vLLM 0.26.0 runs MXFP4 MoE on Hopper either through Marlin (compiled CUDA; its choice for
non-gpt-oss models) or through OpenAI's `triton_kernels` `matmul_ogs` (Mxfp4MoeBackend.TRITON,
its choice for gpt-oss). This script measures the second: the `triton_kernels` package that
vLLM 0.26.0 vendors (vllm/third_party/triton_kernels, pure Python + Triton), called the way
vLLM's unfused Triton path calls it: routing(), weights swizzled to the Hopper MX layouts
(as vllm/model_executor/layers/quantization/utils/mxfp4_utils.py:_swizzle_mxfp4 does, with
split_k=1), matmul_ogs for w13 with the gather, SiLU-and-multiply in PyTorch, matmul_ogs for
w2 with the scatter, the routing weights and the top-k sum. The outputs are compared.

    python benchmarks/mxfp4_moe/compare_vllm.py [--triton-kernels DIR]   # DIR holds triton_kernels/

Without --triton-kernels it uses the copy inside the vLLM on the path (vllm/third_party, as the
offline payload's unpacked engine has it: `source "$(python3 scripts/offline-gpu/receive.py --installed)"` first), found
without importing vLLM.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import harness


def vendored_triton_kernels() -> Path | None:
    """vllm/third_party of the vLLM that `import vllm` would load, if it holds triton_kernels."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.origin:
        return None
    third = Path(spec.origin).parent / "third_party"
    return third if (third / "triton_kernels" / "matmul_ogs.py").is_file() else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--triton-kernels",
        type=Path,
        default=None,
        help="folder that contains the triton_kernels package (default: the installed vLLM's third_party)",
    )
    ap.add_argument("--variants", default="glm,dsv4,k3")
    ap.add_argument("--layout", default="frag", choices=("frag", "converter"), help="our kernel's weight layout")
    ap.add_argument("--batches", default="1,2,4,8,16,32,64")
    args = ap.parse_args()
    args.triton_kernels = args.triton_kernels or vendored_triton_kernels() or Path("vllm-not-on-path")
    if not (args.triton_kernels / "triton_kernels" / "matmul_ogs.py").is_file():
        print(
            f"compare_vllm: {args.triton_kernels}/triton_kernels/matmul_ogs.py not found; put the vllm==0.26.0 "
            "engine on the path (source the env.sh that `receive.py --installed` prints) or pass --triton-kernels DIR",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(args.triton_kernels))

    import torch
    import triton_kernels.matmul_ogs_details.opt_flags as opt_flags
    from triton_kernels.matmul_ogs import FlexCtx, PrecisionConfig, matmul_ogs
    from triton_kernels.numerics import InFlexData
    from triton_kernels.routing import routing, routing_from_bitmatrix
    from triton_kernels.tensor import FP4, Bitmatrix, convert_layout, wrap_torch_tensor
    from triton_kernels.tensor_details import layout

    from cookbook.kernels.mxfp4_moe import VARIANTS, fused_moe_mxfp4, load_table, moe_workspace, pick
    from cookbook.kernels.mxfp4_moe.prepare import prepare_experts
    from cookbook.kernels.mxfp4_moe.reference import moe_torch, rel_error

    opt_flags.update_opt_flags_constraints({"split_k": 1})  # what vLLM sets on SM90

    def swizzle(packed, scales):
        vl, vopts = layout.make_default_matmul_mxfp4_w_layout(mx_axis=1)
        sl, sopts = layout.make_default_matmul_mxfp4_w_scale_layout(mx_axis=1, num_warps=8)
        pad = -scales.shape[-1] % 4
        if pad:
            scales = torch.nn.functional.pad(scales, (0, pad))
        w = convert_layout(wrap_torch_tensor(packed.transpose(-2, -1), dtype=FP4), vl, **vopts)
        s = convert_layout(wrap_torch_tensor(scales.transpose(-2, -1)), sl, **sopts)
        return w, PrecisionConfig(weight_scale=s, flex_ctx=FlexCtx(rhs_data=InFlexData()))

    rows = []
    for v in args.variants.split(","):
        shape = VARIANTS[v]
        torch.cuda.empty_cache()
        w = harness.make_experts(shape, seed=1)
        w1, pc1 = swizzle(w[0], w[1])
        w2, pc2 = swizzle(w[2], w[3])
        table = load_table(v)
        i = shape.intermediate
        wf = prepare_experts(*w) if args.layout == "frag" else w  # our kernel's one-time layout step
        ws = moe_workspace("cuda")  # held as a server would, one per device

        for b in [int(x) for x in args.batches.split(",")]:
            g = torch.Generator(device="cuda").manual_seed(300 + b)
            logits = [torch.rand(b, shape.experts, device="cuda", generator=g) for _ in range(harness.ROTATIONS)]
            routs = []
            for lg in logits:
                vals, ids = lg.topk(shape.top_k, dim=1)
                routs.append((torch.softmax(vals, 1).contiguous(), ids.to(torch.int32).contiguous()))
            x = torch.randn(b, shape.hidden, device="cuda", generator=g).bfloat16()
            cfg = pick(table, b)

            def ours(r):
                return fused_moe_mxfp4(
                    x, *wf, *routs[r], config=cfg, check_ids=False, scale_max=127, layout=args.layout, workspace=ws
                )

            pow2_k = shape.top_k & (shape.top_k - 1) == 0

            def routing_from_ids(r):
                # triton_kernels' own topk needs a power-of-two k; for top-6 vLLM builds the
                # routing from topk ids/weights (make_routing_data): a bitmatrix, then
                # routing_from_bitmatrix. The bit packing is done here with torch ops.
                wts, ids = routs[r]
                cols = -(-shape.experts // 32)
                ids64 = ids.long()
                bits = torch.zeros(b, cols, dtype=torch.int64, device="cuda")
                bits.scatter_add_(1, ids64 // 32, torch.ones_like(ids64) << (ids64 % 32))
                bm = Bitmatrix(
                    bits.to(torch.int32).view(torch.uint32), shape=[b, cols * 32], shape_max=[b, None], scratchpad=None
                )
                return routing_from_bitmatrix(bm, wts.bfloat16(), ids.to(torch.int16), shape.experts, shape.top_k)

            def vllm_tk(r):
                rd, gi, si = routing(logits[r], shape.top_k, sm_first=False) if pow2_k else routing_from_ids(r)
                y1 = matmul_ogs(x, w1, None, rd, gather_indx=gi, precision_config=pc1).view(-1, 2 * i)
                act = torch.nn.functional.silu(y1[:, :i]) * y1[:, i:]
                return matmul_ogs(act, w2, None, rd, scatter_indx=si, precision_config=pc2, gammas=rd.gate_scal).view(
                    b, shape.hidden
                )

            row = {"variant": v, "batch": b}
            try:
                a, ref_out = ours(0), vllm_tk(0)
                row["err_vs_vllm"] = rel_error(a.float().cpu().numpy(), ref_out.float().cpu().numpy())
                if b in (1, 8, 64):
                    ref = moe_torch(x, *w, *routs[0]).cpu().numpy()
                    row["vllm_err_vs_ref"] = rel_error(ref_out.float().cpu().numpy(), ref)
                    row["ours_err_vs_ref"] = rel_error(a.float().cpu().numpy(), ref)
                row["ours_us"] = harness.graph_time(ours, harness.ROTATIONS) * 1e6
                try:
                    row["vllm_us"] = harness.graph_time(vllm_tk, harness.ROTATIONS) * 1e6
                    row["vllm_timing"] = "cuda graph"
                except Exception as exc:  # not capturable: time eagerly (includes launch gaps)
                    torch.cuda.synchronize()
                    row["vllm_timing"] = f"eager ({type(exc).__name__})"
                    row["vllm_us"] = (
                        sum(harness.event_time(lambda: vllm_tk(r), reps=3) for r in range(harness.ROTATIONS))
                        / harness.ROTATIONS
                        * 1e6
                    )
                row["speedup"] = row["vllm_us"] / row["ours_us"]
            except Exception as exc:
                import traceback

                traceback.print_exc()
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append(row)
            harness.log(
                f"{v:5s} b={b:3d} "
                + " ".join(
                    f"{k}={val:.3g}" if isinstance(val, float) else f"{k}={val}"
                    for k, val in row.items()
                    if k not in ("variant", "batch")
                )
            )
        del w, wf, w1, w2, pc1, pc2
    harness.log("\nvariant batch  ours_us  vllm_triton_us  speedup  err_vs_vllm")
    for r in rows:
        if "error" in r:
            harness.log(f"{r['variant']:7s} {r['batch']:5d}  ERROR {r['error'][:100]}")
        else:
            harness.log(
                f"{r['variant']:7s} {r['batch']:5d} {r['ours_us']:8.1f} {r['vllm_us']:15.1f} "
                f"{r['speedup']:8.2f} {r['err_vs_vllm']:11.1e}  ({r['vllm_timing']})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
