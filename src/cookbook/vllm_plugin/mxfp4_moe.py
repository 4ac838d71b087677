"""The patch on vLLM 0.26.0's Mxfp4MoEMethod (the one module of the package that imports vLLM).

Hand-written because vLLM has no hook for a third-party MoE kernel: its MXFP4 backends are an
enum chosen by its oracle. The patch wraps three methods and changes nothing else:

- `__init__`: refuses (checks.py) experts the kernel does not compute, before any weight exists.
- `process_weights_after_loading`: before vLLM converts the experts to its backend's layout
  (Marlin on sm_90), repacks them once into the kernel's frag layout (`prepare_experts`) and keeps
  them on the layer, with the tuned table of the layer's shape and one workspace per device. vLLM's
  own copy stays for the batches above the table, so the experts take twice their memory.
- `apply`: batches of 1..max(table) tokens go to `fused_moe_mxfp4`; larger ones, and anything the
  kernel does not take (an expert map, weights on the input), to vLLM's own kernel.

With fill=True (COOKBOOK_MXFP4_MOE_DUMMY_EXPERTS=1) `process_weights_after_loading` first writes
random MXFP4 experts, seeded by the layer's name, for --load-format dummy: vLLM's dummy loader leaves
integer tensors as they were created (zeros), which would make every expert output zero. It also
sets the layer's routing correction bias (DeepSeek-V4's `noaux_tc` layers) to zero: the dummy loader
draws it from [-1e-3, 1e-3] like every float, about 100 times the spread of the dummy router's
token-dependent scores, so every token would pick among the same few experts, where a checkpoint's
bias balances the load over all of them (`balance_dummy_routing`).
"""

from __future__ import annotations

import functools
import hashlib
import logging
from dataclasses import dataclass

from . import checks

log = logging.getLogger("vllm.cookbook_mxfp4_moe")  # under "vllm": its handler prints to the server log
STATE = "_cookbook_mxfp4_moe"
DUMMY_SCALES = (118, 122)  # E8M0 bytes 2^-9 .. 2^-6: with E2M1 values up to 6, weights of about 1/sqrt(H)
_WORKSPACES: dict = {}
_WARMED: set = set()


@dataclass
class KernelState:
    w13: object
    w13_scales: object
    w2: object
    w2_scales: object
    scale_max: int
    table: dict
    max_tokens: int
    workspace: object
    swiglu_limit: float | None
    variant: str


def install(route: bool, fill: bool) -> None:
    """Patch once per process. route: our kernel serves; fill: random experts for dummy loads."""
    try:
        import vllm
    except ImportError:
        checks.check_engine(None)
    checks.check_engine(vllm.__version__)
    from vllm.model_executor.layers.quantization import mxfp4 as vmx

    if getattr(vmx.Mxfp4MoEMethod, STATE, None) is not None:
        return
    if route:
        from vllm.platforms import current_platform

        cap = current_platform.get_device_capability() if current_platform.is_cuda() else None
        checks.check_gpu(current_platform.is_cuda(), (cap.major, cap.minor) if cap else None)
    _patch(vmx, route, fill)
    log.info("cookbook MXFP4 MoE plugin: %s", "kernel on" if route else "dummy experts only")


def _patch(vmx, route: bool, fill: bool) -> None:
    cls = vmx.Mxfp4MoEMethod
    init, pwal, apply = cls.__init__, cls.process_weights_after_loading, cls.apply

    @functools.wraps(init)
    def __init__(self, moe):
        if route:
            check_layer(moe)
        init(self, moe)

    @functools.wraps(pwal)
    def process_weights_after_loading(self, layer):
        if fill:
            fill_dummy_experts(layer)
            balance_dummy_routing(layer)
        if route and self.mxfp4_backend != vmx.Mxfp4MoeBackend.NONE:
            setattr(layer, STATE, prepare_layer(layer))
        pwal(self, layer)

    @functools.wraps(apply)
    def apply_(self, layer, x, topk_weights, topk_ids, shared_experts, shared_experts_input):
        st = getattr(layer, STATE, None)
        if st is None or not 1 <= x.shape[0] <= st.max_tokens or not takes(layer):
            return apply(self, layer, x, topk_weights, topk_ids, shared_experts, shared_experts_input)
        out = forward(st, x, topk_weights, topk_ids)
        if shared_experts is not None and self.moe_kernel.prepare_finalize.supports_async():
            from vllm.model_executor.layers.fused_moe.runner.shared_experts import SharedExpertsOrder

            # what vLLM's kernel does in its finalize: the shared experts' turn inside the MoE call
            shared_experts(shared_experts_input, SharedExpertsOrder.MK_INTERNAL_OVERLAPPED)
        return out

    cls.__init__ = __init__
    cls.process_weights_after_loading = process_weights_after_loading
    cls.apply = apply_
    setattr(cls, STATE, "patched")
    if route:
        gpt = vmx.GptOssMxfp4MoEMethod
        gpt_init = gpt.__init__

        @functools.wraps(gpt_init)
        def gpt_oss_init(self, moe):
            checks.refuse_gpt_oss()
            gpt_init(self, moe)  # not reached

        gpt.__init__ = gpt_oss_init


def check_layer(moe) -> None:
    """Refuse, at model construction, a FusedMoEConfig the kernel cannot serve."""
    checks.check_experts(
        activation=getattr(moe.activation, "value", str(moe.activation)),
        has_bias=bool(moe.has_bias),
        swiglu_alpha=moe.swiglu_alpha,
        swiglu_beta=moe.swiglu_beta,
        in_dtype=str(moe.in_dtype).removeprefix("torch."),
    )
    par = moe.moe_parallel_config
    checks.check_parallel(par.tp_size, par.ep_size, bool(par.use_all2all_kernels))
    checks.variant_for(moe.num_experts, moe.hidden_dim, moe.intermediate_size_per_partition, moe.experts_per_token)


def takes(layer) -> bool:
    return layer.expert_map is None and not layer.apply_router_weight_on_input


def prepare_layer(layer) -> KernelState:
    """The layer's experts in the frag layout (new tensors), its table and workspace."""
    from cookbook.kernels.mxfp4_moe import load_for_serving, moe_workspace, prepare_experts
    from cookbook.kernels.mxfp4_moe.moe import scale_byte_max

    w13, w13s = layer.w13_weight.data, layer.w13_weight_scale.data
    w2, w2s = layer.w2_weight.data, layer.w2_weight_scale.data
    e, two_i, h2 = w13.shape
    variant = checks.variant_for(e, 2 * h2, two_i // 2, layer.moe_config.experts_per_token)
    table = load_for_serving(variant)
    p13, s13, p2, s2 = prepare_experts(w13.contiguous(), w13s.contiguous(), w2.contiguous(), w2s.contiguous())
    dev = w13.device
    if str(dev) not in _WORKSPACES:
        _WORKSPACES[str(dev)] = moe_workspace(dev)
    limit = getattr(layer, "swiglu_limit", None)
    limit = float(limit) if limit else None  # vLLM applies the clamp only when the limit is > 0
    st = KernelState(
        p13, s13, p2, s2, scale_byte_max(w13s, w2s), table, max(table), _WORKSPACES[str(dev)], limit, variant
    )
    warm(st, layer.moe_config.experts_per_token)
    return st


def warm(st: KernelState, top_k: int) -> None:
    """Compile the kernels of every table entry now, once per process and (variant, limit): vLLM's first
    call at a decode size may be inside a CUDA graph capture (it runs no warm-up by default)."""
    import time

    import torch

    key = (st.variant, st.swiglu_limit, str(st.w13.device))
    if key in _WARMED:
        return
    t0 = time.monotonic()
    e, dev = st.w13.shape[0], st.w13.device
    for batch in st.table:
        x = torch.zeros(batch, st.w2.shape[1], dtype=torch.bfloat16, device=dev)
        ids = torch.arange(batch * top_k, device=dev, dtype=torch.int32).remainder(e).view(batch, top_k)
        forward(st, x, torch.full((batch, top_k), 1 / top_k, device=dev), ids)
    torch.cuda.synchronize(dev)
    _WARMED.add(key)
    log.info(
        "cookbook MXFP4 MoE plugin: %s kernels compiled for %s tokens in %.1f s",
        st.variant,
        list(st.table),
        time.monotonic() - t0,
    )


def forward(st: KernelState, x, topk_weights, topk_ids):
    from cookbook.kernels.mxfp4_moe import fused_moe_mxfp4, pick

    return fused_moe_mxfp4(
        x.contiguous(),
        st.w13,
        st.w13_scales,
        st.w2,
        st.w2_scales,
        topk_weights.contiguous(),
        topk_ids.contiguous(),
        config=pick(st.table, x.shape[0]),
        check_ids=False,  # no device sync: this runs inside vLLM's CUDA graphs
        scale_max=st.scale_max,
        layout="frag",
        workspace=st.workspace,
        swiglu_limit=st.swiglu_limit,
    )


def balance_dummy_routing(layer) -> None:
    """Zero the layer's e_score_correction_bias, in place: the router and the gate hold the same tensor.

    With vLLM's dummy weights the bias (uniform in [-1e-3, 1e-3]) outweighs the token-dependent part of
    DeepSeek-V4's sqrtsoftplus scores (about 6e-6 across tokens): modelled, 64 tokens then pick among
    7 of the 256 experts instead of about 200 (benchmarks/dummy_routing.py). Zero is the bias of a
    router whose experts are already balanced; hash-routed layers have none."""
    bias = getattr(layer, "e_score_correction_bias", None)
    if bias is not None:
        bias.data.zero_()


def fill_dummy_experts(layer) -> None:
    """Random packed nibbles and E8M0 scales in DUMMY_SCALES, the same for a layer name in every run."""
    import torch

    seed = int.from_bytes(hashlib.sha256(layer.layer_name.encode()).digest()[:8], "little") >> 1
    gen = torch.Generator(device=layer.w13_weight.device).manual_seed(seed)
    for name in ("w13_weight", "w2_weight"):
        packed = getattr(layer, name).data
        packed.copy_(torch.randint(0, 256, packed.shape, generator=gen, device=packed.device, dtype=torch.uint8))
        scales = getattr(layer, f"{name}_scale").data
        lo, hi = DUMMY_SCALES
        scales.copy_(torch.randint(lo, hi + 1, scales.shape, generator=gen, device=scales.device, dtype=torch.uint8))
