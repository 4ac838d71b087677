"""The one renderer of a recipe's launch block: the recipe's flags plus the memory plan's.

`cookbook launch`, the docs pages, the image's launch.sh, `cookbook serve` and the multi-node
blocks all call launch_block(), so what a user pastes is what the image and `serve` run
(tests/recipes/test_one_block.py compares them byte for byte). The recipe package renders;
this module, above it, hands in the plan's flags (it cannot import the planner itself).
"""

from __future__ import annotations

from cookbook.errors import BAD_INPUT, CookbookError
from cookbook.plan.budget import EXPLICIT_MARGIN, make_plan
from cookbook.recipe import launch, multinode
from cookbook.recipe.overrides import parse_set
from cookbook.recipe.resolve import ResolvedRecipe
from cookbook.units import gib


def other_checkpoint(resolved: ResolvedRecipe) -> bool:
    """Whether --set names the served checkpoint (serve.model), rather than the recipe's own."""
    return any(parse_set(s)[0] == "serve.model" for s in resolved.sets)


def refuse_unfit(resolved: ResolvedRecipe, action: str) -> str | None:
    """`action` refused, with the plan's numbers, when the configuration does not fit the recipe's
    GPUs: `launch` and `serve` then never print or start a block that `cookbook plan` refuses
    (gpu_memory_utilization=0.01 was rendered). GPU platforms only: a CPU plan reads this host's
    memory, and a block is often printed on another machine than the one that serves it.
    Returns a note for stderr where the fit is not judged (serve.model set), else None."""
    r = resolved.recipe
    if r.abstract or r.hardware.platform == "cpu":
        return None
    if other_checkpoint(resolved):
        # The plan's weights are the recipe's checkpoint's: they say nothing of another one (the
        # engine check's scaled copy, a user's own quant), so the fit is not judged, and that is said.
        return (
            f"note: serve.model is set, so the fit of {resolved.slug} is not checked here: the plan's"
            f" weights are the recipe's checkpoint's (`cookbook plan {resolved.slug} --checkpoint PATH`"
            " counts that checkpoint's)"
        )
    p = make_plan(resolved)
    if not p.fits:
        quant = f" --quant {resolved.quant}" if resolved.quant else ""
        raise CookbookError(
            f"{action}: it does not fit: " + "; ".join(p.refusals),
            help=f"`cookbook plan {resolved.slug}{quant}` with the same --set shows the numbers",
            exit_code=BAD_INPUT,
        )
    return None


def planned(resolved: ResolvedRecipe) -> launch.Planned:
    """The plan's flags: --kv-cache-memory-bytes where the recipe asks for an explicit pool
    (plan.explicit_kv_bytes) and sets none itself; none otherwise (the CPU recipe, most others)."""
    r = resolved.recipe
    if r.abstract or not (r.plan and r.plan.explicit_kv_bytes) or r.serve.arg("kv_cache_memory_bytes") is not None:
        return launch.NO_PLAN
    p = make_plan(resolved)
    quant = f" --quant {resolved.quant}" if resolved.quant else ""
    command = f"cookbook plan {resolved.slug}{quant}"
    if not p.fits or p.pool_bytes <= 0:
        raise CookbookError(
            f"cannot size the KV pool of {resolved.slug}{quant}: " + "; ".join(p.refusals or ["no room for a pool"]),
            help=f"`{command}` shows the numbers",
            exit_code=BAD_INPUT,
        )
    s = p.setup
    usable = int(s.device_bytes * (1 - EXPLICIT_MARGIN))
    figures = (
        f"device {gib(s.device_bytes)} x {1 - EXPLICIT_MARGIN:g} = {gib(usable)}; weights {gib(p.weights_per_gpu_bytes)}"
        f" (left after weights {gib(s.device_bytes - p.weights_per_gpu_bytes)})",
        f"- activation peak {gib(p.activation_bytes)} - non-torch {gib(p.non_torch_bytes)}"
        f" - workspaces at max_model_len {s.max_model_len:,} {gib(p.workspace_bytes)}"
        f" - CUDA graphs {gib(p.graph_bytes)}",
        f"= KV pool {gib(p.pool_bytes)} ({p.pool_tokens:,} tokens), rounded down to MiB",
    )
    return launch.Planned({"kv_cache_memory_bytes": p.pool_bytes}, figures, command)


def launch_block(
    resolved: ResolvedRecipe,
    *,
    comments: bool = True,
    nodes: int | None = None,
    runtime: str = "mp",
    node_rank: int | None = None,
    head_addr: str = multinode.HEAD_ADDR,
    image: str | None = None,
) -> str:
    """The block `cookbook launch` prints for this resolved recipe (quant and --set applied):
    one node's, or with `nodes` the multi-node blocks or LeaderWorkerSet manifest."""
    plan = planned(resolved)
    if nodes is None:
        return launch.render(resolved, plan, comments)
    return multinode.render(resolved, plan, nodes, runtime, node_rank, head_addr, comments=comments, image=image)
