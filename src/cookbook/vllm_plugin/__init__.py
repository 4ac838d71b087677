"""vLLM general plugin: vLLM 0.26.0's MXFP4 fused MoE on the cookbook's kernel (kernels/mxfp4-moe).

Registered through the `vllm.general_plugins` entry point (pyproject.toml), so every vLLM process
(API server, engine core, workers) calls `register` at start. It does nothing unless the launch
exports COOKBOOK_MXFP4_MOE=1 (a recipe naming `kernels: mxfp4-moe` does): then it checks the engine
and the GPU, refusing with one message, and patches `Mxfp4MoEMethod` (`mxfp4_moe.py`, the one
module that imports vLLM). COOKBOOK_MXFP4_MOE_DUMMY_EXPERTS=1 (perf recipes with --load-format dummy)
fills the experts with random MXFP4 before either path repacks them, with the plugin on or off.
"""

from __future__ import annotations

import os

from cookbook.kernel_catalogue import MXFP4_MOE

ENV_ENABLE = MXFP4_MOE.backend("sm90").enable_env
ENV_DUMMY_EXPERTS = "COOKBOOK_MXFP4_MOE_DUMMY_EXPERTS"


def enabled(env=None) -> bool:
    return (env if env is not None else os.environ).get(ENV_ENABLE, "") == "1"


def dummy_experts(env=None) -> bool:
    return (env if env is not None else os.environ).get(ENV_DUMMY_EXPERTS, "") == "1"


def register() -> None:
    """The entry point vLLM calls (maybe several times, in several processes)."""
    route, fill = enabled(), dummy_experts()
    if not (route or fill):
        return
    from . import mxfp4_moe

    mxfp4_moe.install(route=route, fill=fill)
