"""One DeepSeek-V4-Flash MoE layer of vLLM 0.26.0 with the plugin: the kernel against vLLM's own MoE.

`dsv4_layer` builds vLLM's own layer (`FusedMoE` with the FP8 config storing experts as MXFP4,
`store_dtype "mxfp4"`, what DeepseekV4FP8Config returns for `expert_dtype "fp4"`: the quant method
is `Mxfp4MoEMethod`, and vLLM picks its sm_90 backend, Marlin, itself), fills it with random MXFP4
and runs vLLM's load step, which the plugin wraps. The GPU tests use it; run as a script it times
both `apply` paths (the patched one and the original, `__wrapped__`) in CUDA graphs:

    python benchmarks/mxfp4_moe/layer_bench.py [--tokens 1,4,16,64] [--json FILE]

Each batch is timed twice: routed uniformly over the 256 experts (what a checkpoint's balanced router
gives), and routed among CONCENTRATED experts only (what vLLM's dummy routing bias leaves a batch:
benchmarks/dummy_routing.py), so that a served A/B on dummy weights can be read against both.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys

from cookbook.vllm_plugin import mxfp4_moe

E, H, I, K, LIMIT = 256, 4096, 2048, 6, 10.0  # DeepSeek-V4-Flash's routed experts and swiglu_limit
CONCENTRATED = 7  # experts a batch of 4-64 reaches under the dummy routing bias (benchmarks/dummy_routing.py)
_CONFIG: list = []  # the VllmConfig of the layer dsv4_layer built


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dsv4_layer():
    """(vLLM's RoutedExperts after load, its raw experts as loaded, the Mxfp4MoEMethod class)."""
    import torch
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.model_executor.layers.fused_moe import FusedMoE
    from vllm.model_executor.layers.quantization.fp8 import Fp8Config
    from vllm.model_executor.layers.quantization.mxfp4 import Mxfp4MoEMethod

    os.environ["COOKBOOK_MXFP4_MOE"] = "1"
    mxfp4_moe.install(route=True, fill=False)
    cfg = VllmConfig()
    with set_current_vllm_config(cfg):
        init_distributed_environment(1, 0, f"tcp://127.0.0.1:{_port()}", 0, backend="nccl")
        initialize_model_parallel(1, 1)
        # vLLM's modular MoE kernels take their buffers from the worker's workspace manager, which
        # the GPU worker (v1/worker/gpu_worker.py) sets up in a server; a layer built outside one needs it too.
        from vllm.v1.worker.workspace import init_workspace_manager

        init_workspace_manager(torch.device("cuda"))
        quant = Fp8Config(is_checkpoint_fp8_serialized=True, weight_block_size=[128, 128], store_dtype="mxfp4")
        with torch.device("cuda"):
            runner = FusedMoE(
                num_experts=E,
                top_k=K,
                hidden_size=H,
                intermediate_size=I,
                params_dtype=torch.bfloat16,
                quant_config=quant,
                prefix="model.layers.3.ffn.experts",
                swiglu_limit=LIMIT,
            )
        routed = runner.routed_experts
        if not isinstance(routed.quant_method, Mxfp4MoEMethod):
            raise RuntimeError(f"vLLM chose {type(routed.quant_method).__name__}, not Mxfp4MoEMethod")
        mxfp4_moe.fill_dummy_experts(routed)
        names = ("w13_weight", "w13_weight_scale", "w2_weight", "w2_weight_scale")
        raw = [getattr(routed, n).data.clone() for n in names]
        routed.quant_method.process_weights_after_loading(routed)
    _CONFIG.append(cfg)
    return routed, raw, Mxfp4MoEMethod


def routing(tokens: int, seed: int, scale: float = 1.0, experts: int = E):
    """x (BF16), top-k weights (float32, summing to 1) and int32 ids for `tokens` random tokens, each
    routed to K of the first `experts` experts."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    x = (torch.randn(tokens, H, device="cuda", generator=g) * scale).bfloat16()
    vals, ids = torch.rand(tokens, experts, device="cuda", generator=g).topk(K, dim=1)
    return x, torch.softmax(vals, 1).float(), ids.to(torch.int32)


def paths(routed, cls):
    """{"ours": the patched apply, "vllm": the original}, each f(x, w, ids) -> out, run under the
    config the layer was built with (as in a server, where it is current)."""
    from vllm.config import set_current_vllm_config

    method = routed.quant_method

    def under_config(apply):
        def run(x, w, ids):
            with set_current_vllm_config(_CONFIG[-1]):
                return apply(method, routed, x, w, ids, None, None)

        return run

    return {"ours": under_config(cls.apply), "vllm": under_config(cls.apply.__wrapped__)}


def time_us(fn, args, calls: int = 20, replays: int = 20) -> float:
    """Microseconds per call: `calls` calls captured in one CUDA graph, replayed `replays` times."""
    import torch

    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn(*args)
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000 / (calls * replays)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="1,4,16,64")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args(argv)
    routed, _, cls = dsv4_layer()
    fns = paths(routed, cls)
    out: dict = {"concentrated": {"experts": CONCENTRATED}}
    for t in (int(v) for v in args.tokens.split(",")):
        for where, experts, label in (
            (out, E, "uniform"),
            (out["concentrated"], CONCENTRATED, f"{CONCENTRATED} experts"),
        ):
            row = {name: time_us(fn, routing(t, t, experts=experts)) for name, fn in fns.items()}
            where[str(t)] = {"ours_us": row["ours"], "vllm_us": row["vllm"], "speedup": row["vllm"] / row["ours"]}
            print(
                f"T={t:3d}, {label:>9}: ours {row['ours']:8.1f} us, vLLM's {row['vllm']:8.1f} us, "
                f"{row['vllm'] / row['ours']:.2f}x"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
