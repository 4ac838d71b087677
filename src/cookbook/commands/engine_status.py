"""The engine-check status as list and show print it, and the planner and launch-block renderer the
evidence wing's engine check is given (it sits below cookbook.plan in the layering)."""

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
