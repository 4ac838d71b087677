"""The status list, show and the site print (verified as it is, else the engine check's word beside
it), and the planner and launch-block renderer the evidence wing's engine check is given (that wing
sits below cookbook.plan in the layering)."""

from __future__ import annotations

import json

from cookbook.errors import CookbookError


def tools(resolved):
    """(plan_fn, block_fn) for the evidence wing: the recipe with --set applied, planned on one GPU,
    and the block `cookbook launch` prints for it."""
    from cookbook.plan.budget import make_plan
    from cookbook.plan.launch_block import launch_block
    from cookbook.recipe.resolve import resolve

    def cached(kind, make):
        def fn(sets, *more):
            # the same recipe text, --set and config: the same answer
            key = (kind, resolved.content_hash, tuple(sets), json.dumps(more, sort_keys=True))
            if key not in _CACHE:
                _CACHE[key] = make(resolve(resolved.path, sets=list(sets), check=False), *more)
            return _CACHE[key]

        return fn

    plan = cached("plan", lambda r, config=None: make_plan(r, gpus=1, config=config))
    return plan, cached("block", launch_block)


_CACHE: dict = {}


def shown_status(resolved, word: str) -> str:
    """The status list/show print: verified as it is; otherwise the engine check's word beside it."""
    from cookbook.evidence.engine_check import status
    from cookbook.recipe.verified import VERIFIED

    if word == VERIFIED:
        return word
    try:
        found, _ = status(resolved, *tools(resolved))
    except (CookbookError, ValueError, OSError) as e:  # a recipe the planner refuses shows no engine check
        found = f"engine-check refused ({str(e).splitlines()[0][:80]})"
    return word if found is None else f"{word}; {found}"


def engine_check_lines(resolved) -> list[str]:
    """A recipe page's paragraph on its engine check: the bundle, its word, what it proves and what not
    (nothing when the recipe has no bundle)."""
    from cookbook.evidence.engine_check import bundles, status

    found = bundles(resolved)
    if not found:
        return []
    word, reasons = status(resolved, *tools(resolved))
    rel = found[-1].relative_to(resolved.path.parent.parent.parent).as_posix()
    why = f" ({'; '.join(reasons)})" if reasons else ""
    return [
        f"Engine check: *{word}*{why}, bundle `{rel}/`. It proves the engine accepts the flags, builds the "
        "architecture and fits the plan on this GPU kind (the block served on one GPU with random weights); "
        "it does not prove quality, full-depth speed or multi-GPU communication.",
        "",
    ]
