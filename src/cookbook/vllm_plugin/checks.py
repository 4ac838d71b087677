"""What the plugin refuses, as functions of plain facts (no vLLM, no torch: tested on any machine).

Each refusal is one PluginRefusal (a CookbookError): what is wrong, and the fix. The activation
refusals name the vLLM 0.26.0 MXFP4 models that the kernel therefore cannot serve.
"""

from __future__ import annotations

from cookbook.errors import CookbookError
from cookbook.kernels.mxfp4_moe.shapes import VARIANTS

ENGINE_VERSION = "0.26.0"  # the release whose Mxfp4MoEMethod the patch is written against
CAPABILITY = (9, 0)  # sm_90: the BF16x2 PTX decoders and the tables are Hopper's
OFF = "unset COOKBOOK_MXFP4_MOE (or remove `kernels: mxfp4-moe` from the recipe) to serve with vLLM's own MXFP4 MoE"
GPT_OSS = (
    "gpt-oss (GptOssMxfp4MoEMethod: SwiGLU-OAI with interleaved gate/up, alpha 1.702, clamp 7, up + 1, "
    "and expert biases)"
)


class PluginRefusal(CookbookError):
    """The plugin cannot run here; the message says why and what it cannot serve."""


def check_engine(version: str | None) -> None:
    if version is None:
        raise PluginRefusal("cookbook's MXFP4 MoE plugin: vLLM is not installed in this environment", OFF)
    if version.split("+")[0] != ENGINE_VERSION:
        raise PluginRefusal(
            f"cookbook's MXFP4 MoE plugin patches vLLM {ENGINE_VERSION}'s Mxfp4MoEMethod; this is vLLM {version}",
            f"pin vllm=={ENGINE_VERSION} (recipes/dsv4-flash-perf-h200), or {OFF}",
        )


def check_gpu(is_cuda: bool, capability: tuple[int, int] | None, name: str | None = None) -> None:
    """is_cuda: vLLM's platform is CUDA; capability: (major, minor) of GPU 0 (None: none found)."""
    where = f"{name or 'GPU'} sm_{capability[0]}{capability[1]}" if capability else "no GPU"
    if not is_cuda or capability is None:
        where = "no CUDA GPU" if not is_cuda else where
    if not is_cuda or capability != CAPABILITY:
        raise PluginRefusal(
            f"cookbook's MXFP4 MoE plugin needs an NVIDIA Hopper GPU (sm_90; its decoders are BF16x2 PTX "
            f"and its tables are tuned on the H200); this machine has {where}",
            OFF,
        )


def check_experts(
    activation: str,
    has_bias: bool,
    swiglu_alpha: float | None = None,
    swiglu_beta: float | None = None,
    in_dtype: str = "bfloat16",
) -> None:
    """The expert math the kernel computes: SiLU(gate) * up (optionally clamped), no biases, BF16 in."""
    problems = []
    if activation != "silu":
        problems.append(f"activation {activation!r} (the kernel computes SiLU-and-multiply only)")
    if has_bias:
        problems.append("expert biases (the kernel has none)")
    if swiglu_alpha not in (None, 1.0) or swiglu_beta not in (None, 0.0):
        problems.append(f"a SwiGLU with alpha {swiglu_alpha} and beta {swiglu_beta} (the kernel: alpha 1, beta 0)")
    if in_dtype != "bfloat16":
        problems.append(f"{in_dtype} activations (the kernel takes BF16)")
    if problems:
        raise PluginRefusal(
            f"cookbook's MXFP4 MoE plugin cannot run these experts: {'; '.join(problems)}. So it cannot serve "
            f"{GPT_OSS}, nor any MXFP4 model whose experts are not bias-free SiLU-and-multiply; it serves "
            "DeepSeek-V4's (SiLU with swiglu_limit)",
            OFF,
        )


def refuse_gpt_oss() -> None:
    raise PluginRefusal(f"cookbook's MXFP4 MoE plugin cannot serve {GPT_OSS}", OFF)


def check_parallel(tp_size: int, ep_size: int, use_all2all: bool) -> None:
    if tp_size != 1 or ep_size != 1 or use_all2all:
        raise PluginRefusal(
            f"cookbook's MXFP4 MoE plugin runs the whole expert set on one GPU; this layer is split "
            f"(tensor parallel {tp_size}, expert parallel {ep_size}{', all-to-all' if use_all2all else ''})",
            f"serve on one GPU (tensor_parallel_size 1, no expert parallel), or {OFF}",
        )


def variant_for(experts: int, hidden: int, intermediate: int, top_k: int) -> str:
    """The tuned table whose shape this layer has."""
    for name, shape in VARIANTS.items():
        if (shape.experts, shape.hidden, shape.intermediate, shape.top_k) == (experts, hidden, intermediate, top_k):
            return name
    tuned = ", ".join(
        f"{n} (E={s.experts}, H={s.hidden}, I={s.intermediate}, top-{s.top_k})" for n, s in VARIANTS.items()
    )
    raise PluginRefusal(
        f"cookbook's MXFP4 MoE plugin has no tuned table for experts E={experts}, H={hidden}, "
        f"I={intermediate}, top-{top_k}; tuned: {tuned}",
        f"tune one (python benchmarks/mxfp4_moe/bench.py --tune), or {OFF}",
    )
