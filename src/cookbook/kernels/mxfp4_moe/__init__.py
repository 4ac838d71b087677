"""Fused MXFP4 MoE Triton kernel for decode-sized batches (kernels/mxfp4-moe).

Heavy imports (torch, triton) happen on first use of the functions below.
"""

from .config import ConfigError, LaunchConfig, load_for_serving, load_table, pick
from .shapes import VARIANTS, MoEShape


def fused_moe_mxfp4(*args, **kwargs):
    from .moe import fused_moe_mxfp4 as impl

    return impl(*args, **kwargs)


def prepare_experts(*args, **kwargs):
    from .prepare import prepare_experts as impl

    return impl(*args, **kwargs)


def moe_workspace(*args, **kwargs):
    from .moe import moe_workspace as impl

    return impl(*args, **kwargs)


def dequantize_mxfp4(*args, **kwargs):
    from .moe import dequantize_mxfp4 as impl

    return impl(*args, **kwargs)


__all__ = [
    "VARIANTS",
    "MoEShape",
    "LaunchConfig",
    "ConfigError",
    "load_table",
    "load_for_serving",
    "pick",
    "fused_moe_mxfp4",
    "moe_workspace",
    "prepare_experts",
    "dequantize_mxfp4",
]
