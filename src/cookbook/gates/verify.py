"""Earned verification: a recipe's `verified` block comes only from a passing evidence bundle.

This module decides whether a bundle may verify a recipe and builds the block from it; the
recipe package writes it into recipe.yaml (cookbook.recipe.verified.write_verified).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cookbook.gates.bundle import load_results
from cookbook.gates.evidence import environment_of
from cookbook.recipe.gates_spec import GATE_NAMES
from cookbook.recipe.verified import write_verified


def refusals(resolved, doc: dict) -> list[str]:
    """Every reason results.json's own claims cannot verify this recipe (empty list: they can).
    verify() also re-checks the files and recomputes every verdict (cookbook.gates.evidence.recheck)."""
    out = []
    declared = resolved.recipe.gates.declared()
    if not declared:
        out.append("the recipe declares no gates, so there is nothing to verify")
    if not doc.get("complete"):
        out.append("the bundle is incomplete (the run was interrupted); run the gates again")
    if doc.get("recipe_hash") != resolved.content_hash:
        out.append(
            f"the bundle ran on recipe {doc.get('recipe_hash')} but the recipe is now "
            f"{resolved.content_hash}; run the gates again on the current recipe"
        )
    if doc.get("recipe") not in (None, resolved.slug):
        out.append(f"the bundle is for recipe {doc.get('recipe')!r}, not {resolved.slug!r}")
    if doc.get("only"):
        out.append(f"the bundle ran only {doc['only']} (--only); verification needs every declared gate")
    gates = doc.get("gates", {})
    for name in declared:
        g = gates.get(name)
        if g is None:
            out.append(f"gate {name} is declared but absent from the bundle")
        elif g.get("status") != "passed":
            out.append(f"gate {name} {g.get('status')}: {g.get('reason', '')[:200]}")
    env = doc.get("environment") or {}
    if env.get("kind") not in ("env-lock", "image"):
        out.append(
            "the bundle records neither an environment lock nor an image digest "
            "(pass --env-lock, --env-lock-cmd or --image-digest to `gates run`)"
        )
    return out


def _key_figures(measured: dict) -> dict:
    return {k: v for k, v in measured.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}


def block_for(resolved, doc: dict, bundle: Path) -> dict[str, Any]:
    environment = environment_of(doc)
    try:
        from cookbook.recipe.paths import repo_root

        bundle_ref = str(bundle.resolve().relative_to(repo_root()))
    except (ValueError, ImportError):
        bundle_ref = str(bundle.resolve())
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "recipe_hash": resolved.content_hash,
        "environment": environment,
        "bundle": bundle_ref,
        "server": doc.get("base_url"),
        "gates": {
            name: {"status": doc["gates"][name]["status"], "measured": _key_figures(doc["gates"][name]["measured"])}
            for name in GATE_NAMES
            if name in doc["gates"]
        },
    }


def verify(resolved, bundle: Path) -> tuple[list[str], dict | None]:
    """(refusals, block written). Writes the block only when there are no refusals."""
    from cookbook.gates.evidence import recheck

    reasons = recheck(resolved, bundle)  # reads results.json itself, and says so when it cannot
    if reasons:
        return reasons, None
    block = block_for(resolved, load_results(bundle), bundle)
    write_verified(resolved.path, block)
    return [], block
