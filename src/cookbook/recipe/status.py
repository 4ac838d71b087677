"""verified / unverified / stale: the one definition every command uses."""

from __future__ import annotations

from pathlib import Path


def verified_status(slug_or_path: str | Path) -> str:
    """'verified' when the recipe's verified block matches its current content hash,
    'stale' when it does not, 'unverified' when there is no block (or it cannot resolve)."""
    from cookbook.recipe import errors as E
    from cookbook.recipe.resolve import resolve

    try:
        resolved = resolve(slug_or_path, check=False)
    except E.RecipeError:
        return "unverified"
    return status_of(resolved)


def status_of(resolved) -> str:
    """Status of an already resolved recipe. The recorded hash is of the configuration
    the gates ran on (the recipe as written: default quant, no --set)."""
    block = resolved.recipe.verified
    if block is None:
        return "unverified"
    return "verified" if block.recipe_hash == resolved.content_hash else "stale"
