"""Does an engine-check checkpoint fit the card, before the run spends device time on it?

An engine-check case serves a recipe's block on one GPU with random weights, at the depth its
config.json states (scripts/offline-gpu/engine-check). Two things stop such a run after minutes:

- **The load.** vLLM 0.26.0 allocates every weight, then fills them one at a time. A tensor of
  fewer than 16 bits that is a float (FP8) is filled through a float16 copy, then cast back
  (`initialize_single_dummy_weight` in model_loader/weight_utils.py): for a moment the card holds
  all the weights plus 3 bytes per element of that tensor. On 2026-12-08 the 8-layer GLM-5.2 FP8
  checkpoint (64.4 GiB of weights on the H200) stopped there on an H100 after 116 s: "Tried to
  allocate 12.00 GiB" (the float16 copy of one layer's fused expert gate/up tensor) with 70.65 GiB
  allocated, of 79.18 GiB.
- **The pool.** vLLM refuses to start when its KV pool cannot hold one max_model_len sequence.
  The plan's pool is taken less POOL_MARGIN, what vLLM's own pool came out below the plan's in the
  GLM-5.2 engine check on the H200 (51.07 against 56.59 GiB: the MTP drafter's CUDA graphs and
  activation peak, which the plan does not model).

The weights of the reduced checkpoint are estimated from the recipe's: each tensor group of the
full model keeps its bytes per parameter (cookbook.plan.weights.from_recipe), over the reduced
geometry's parameter counts. Against vLLM's "Model loading took": GLM-5.2 FP8 at 8 layers
63.3 GiB estimated, 64.4 measured (H200, 2026-12-05); DeepSeek-V4-Flash at 8 layers 36.0
estimated, 31.45 measured (H100, 2026-12-08).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from cookbook.evidence.engine_check import card_of, geometry_sets, plan_of, scaled_sets
from cookbook.units import GIB, gib

POOL_MARGIN = 6 * GIB
LOAD_SLACK = 1 * GIB  # the CUDA context and the allocator's rounding (0.67 GiB in the H100 run's OOM)
FP8_BITS = (6.0, 10.0)  # a group stored at about 8 bits per weight is FP8: a float that dummy loading copies


@dataclass
class Fit:
    layers: int
    device_bytes: int
    weights_bytes: float
    transient_bytes: float  # the float16 copy and the cast of the largest FP8 tensor, while it is filled
    pool_bytes: float  # the plan's pool with these weights
    one_sequence_bytes: float  # one max_model_len sequence
    max_model_len: int
    unknown: str = ""  # why the weights cannot be estimated (then nothing is judged)

    @property
    def load_peak_bytes(self) -> float:
        return self.weights_bytes + self.transient_bytes + LOAD_SLACK

    def reasons(self) -> list[str]:
        out = []
        if self.unknown:
            return out
        if self.load_peak_bytes > self.device_bytes:
            out.append(
                f"vLLM runs out of memory filling the random weights: {gib(self.weights_bytes)} of weights"
                f" + {gib(self.transient_bytes)} while the largest FP8 tensor is filled through float16"
                f" + {gib(LOAD_SLACK)} of context = {gib(self.load_peak_bytes)}, over the card's"
                f" {gib(self.device_bytes)}"
            )
        elif self.pool_bytes - POOL_MARGIN < self.one_sequence_bytes:
            out.append(
                f"the KV pool ({gib(self.pool_bytes)} in the plan, less {gib(POOL_MARGIN)} that vLLM's came out"
                f" below it) cannot hold one {self.max_model_len:,}-token sequence ({gib(self.one_sequence_bytes)}):"
                " vLLM refuses to start"
            )
        return out


def _largest_fp8_elements(plan) -> int:
    """Elements of the largest FP8 tensor vLLM fills: one layer's fused gate/up experts, or a dense
    MLP's fused gate/up, where that group is stored at about 8 bits."""
    a, groups = plan.geometry.arch, plan.weights.groups
    h = a.hidden_size or 0
    sizes = []

    def fp8(name: str) -> bool:
        bits = groups[name].bits_per_weight if name in groups else None
        return bits is not None and FP8_BITS[0] <= bits <= FP8_BITS[1]

    if a.routed_experts and a.moe_intermediate_size and (fp8("routed_experts") or fp8("mtp")):
        sizes.append(a.routed_experts * 2 * a.moe_intermediate_size * h)
    if a.intermediate_size and fp8("dense_mlp"):
        sizes.append(2 * a.intermediate_size * h)
    return max(sizes, default=0)


def estimate(resolved, config: dict, device_mib: int) -> Fit:
    """The reduced checkpoint of `config` on one card of `device_mib`, as the engine check serves it."""
    from cookbook.plan.weights import param_counts

    base = scaled_sets(resolved, "/engine-check/checkpoint")
    full = plan_of(resolved, base, None, device_mib)
    reduced_sets = [*base, *geometry_sets(config)]
    reduced = plan_of(resolved, reduced_sets, config, device_mib)
    full_counts, reduced_counts = param_counts(full.geometry), param_counts(reduced.geometry)
    weights = sum(
        g.bytes / full_counts[name] * reduced_counts.get(name, 0)
        for name, g in full.weights.groups.items()
        if full_counts.get(name)
    )
    unknown = ""
    if not weights:
        # a recipe that serves a stand-in checkpoint and leaves its geometry to it (dsv3-perf-h200)
        # gives one on-disk size and no tensor groups to scale
        unknown = "the recipe gives no sizes by tensor group to scale to this depth"
    plan = plan_of(resolved, [*reduced_sets, f"model.source.size_gib={weights / GIB:.3f}"], config, device_mib)
    return Fit(
        unknown=unknown,
        layers=int(config["num_hidden_layers"]),
        device_bytes=plan.setup.device_bytes,
        weights_bytes=weights,
        transient_bytes=3 * _largest_fp8_elements(full),
        pool_bytes=plan.vllm_pool_bytes,
        one_sequence_bytes=plan.kv.bytes_for_sequence(plan.setup.max_model_len),
        max_model_len=plan.setup.max_model_len,
    )


def at_depth(config: dict, layers: int) -> dict:
    """config.json with `layers` layers: a per-layer list (DeepSeek-V4's compress_ratios) is cut with it."""
    old, out = int(config["num_hidden_layers"]), copy.deepcopy(config)
    for key, value in config.items():
        if isinstance(value, list) and len(value) == old:
            out[key] = value[:layers]
    out["num_hidden_layers"] = layers
    return out


def deepest_fitting(resolved, config: dict, device_mib: int) -> int | None:
    """The most layers (keeping one past the dense ones, so a MoE layer stays) that fit the card."""
    first = int(config.get("first_k_dense_replace") or 0) + 1
    for layers in range(int(config["num_hidden_layers"]), first - 1, -1):
        if not estimate(resolved, at_depth(config, layers), device_mib).reasons():
            return layers
    return None


def card_mib(env_text: str, resolved) -> tuple[str, int]:
    """(the card's name, torch's total MiB) from a run's env.txt; ValueError when it cannot stand in."""
    card, why_not = card_of(env_text, resolved.recipe.hardware.platform)
    if card is None:
        raise ValueError("; ".join(why_not))
    return card["name"], card["device_mib"]
