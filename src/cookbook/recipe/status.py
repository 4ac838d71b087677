"""verified / stale / unverified: the one definition every command uses.

    verified                      the verified block's recipe_hash is the recipe's current content hash,
                                  AND the bundle it names is present and passes the re-check
                                  (cookbook.gates.evidence: manifest, environment, resolved recipe,
                                  every gate's figures recomputed and judged against the recipe)
    stale                         the block's recipe_hash differs: the recipe changed after it was verified
    unverified                    no block (or the recipe does not resolve)
    unverified (bundle missing)   the block's hash is current but the bundle it names is not there
                                  (or it names none): a hand-written or orphaned block
    unverified (bundle refused)   the bundle is there but fails the re-check (edited, forged, an older
                                  bundle format without a manifest, or figures that miss a threshold)

The recipe package knows the words and the hash; the bundle re-check belongs to the gate suite,
which sits above it. So every function here takes the re-check as `bundle_check(resolved) ->
None | (word, reasons)`, and cookbook.verification passes the gate suite's (imported only
when a block's hash is current, so `cookbook list` pays for it only on such recipes). Without
a re-check a current block is never called verified.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

BundleCheck = Callable[[object], tuple[str, list[str]] | None]

VERIFIED, STALE, UNVERIFIED = "verified", "stale", "unverified"
BUNDLE_MISSING, BUNDLE_REFUSED = "unverified (bundle missing)", "unverified (bundle refused)"
STATUSES = (VERIFIED, STALE, UNVERIFIED, BUNDLE_MISSING, BUNDLE_REFUSED)


def verified_status(slug_or_path: str | Path, bundle_check: BundleCheck) -> str:
    """Status of a recipe by slug or path; 'unverified' when it cannot resolve."""
    from cookbook.recipe import errors as E
    from cookbook.recipe.resolve import resolve

    try:
        resolved = resolve(slug_or_path, check=False)
    except E.RecipeError:
        return UNVERIFIED
    return status_of(resolved, bundle_check)


def status_of(resolved, bundle_check: BundleCheck) -> str:
    """Status of an already resolved recipe. The recorded hash is of the configuration
    the gates ran on (the recipe as written: default quant, no --set)."""
    return status_and_reasons(resolved, bundle_check)[0]


def status_and_reasons(resolved, bundle_check: BundleCheck) -> tuple[str, list[str]]:
    """(status, the reasons behind an 'unverified (...)' status; empty otherwise)."""
    block = resolved.recipe.verified
    if block is None:
        return UNVERIFIED, []
    if block.recipe_hash != resolved.content_hash:
        return STALE, []
    problem = bundle_check(resolved)
    if problem is None:
        return VERIFIED, []
    word, reasons = problem
    return (BUNDLE_MISSING if word == "bundle missing" else BUNDLE_REFUSED), reasons
