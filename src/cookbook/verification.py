"""A recipe's status with its evidence re-checked: the recipe package's words and hash check
(cookbook.recipe.status) joined to the gate suite's bundle re-check (cookbook.gates.evidence).

It sits above both, so the recipe package never imports the gate suite; commands ask here.
"""

from __future__ import annotations

from pathlib import Path

from cookbook.recipe import status as _status


def bundle_check(resolved):
    """The gate suite's re-check of the bundle a current verified block names (cached per bundle)."""
    from cookbook.gates.evidence import block_problem  # lazy: only recipes whose block is current

    return block_problem(resolved, cached=True)


def status_and_reasons(resolved) -> tuple[str, list[str]]:
    return _status.status_and_reasons(resolved, bundle_check)


def status_of(resolved) -> str:
    return _status.status_of(resolved, bundle_check)


def verified_status(slug_or_path: str | Path) -> str:
    return _status.verified_status(slug_or_path, bundle_check)
