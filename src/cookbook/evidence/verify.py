"""`cookbook gates verify`: a recipe's `verified` block comes only from a bundle that passes the re-check.

This module decides whether a bundle may verify a recipe (cookbook.evidence.recheck) and builds
the block from it; the recipe package writes it into recipe.yaml (cookbook.recipe.verified.write_verified).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cookbook.evidence.environment import environment_of
from cookbook.evidence.recheck import recheck
from cookbook.gates.bundle import load_results
from cookbook.recipe.paths import repo_root
from cookbook.recipe.verified import write_verified


def _key_figures(measured: dict) -> dict:
    return {k: v for k, v in measured.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}


def repo_relative(bundle: Path) -> str | None:
    """The bundle's path relative to the checkout ('/'-separated), or None when it lies outside:
    a verified block points only at evidence the repository holds."""
    try:
        return bundle.resolve().relative_to(repo_root().resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):
        return None


def run_date(doc: dict) -> str:
    """The UTC day the gates ran (results.json's `started`, else `finished`), not the day of the verify."""
    for key in ("started", "finished"):
        try:
            when = datetime.fromisoformat(str(doc.get(key)))
        except ValueError:
            continue
        when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
        return when.astimezone(timezone.utc).strftime("%Y-%m-%d")
    raise ValueError("results.json gives no start or finish time (ISO 8601) for the run")


def block_for(resolved, doc: dict, bundle: Path) -> dict[str, Any]:
    bundle_ref = repo_relative(bundle)
    if bundle_ref is None:
        raise ValueError(f"{bundle} lies outside the repository")
    declared = resolved.recipe.gates.declared()
    return {
        "date": run_date(doc),
        "recipe_hash": resolved.content_hash,
        "environment": environment_of(doc),
        "bundle": bundle_ref,
        "server": doc.get("base_url"),
        "gates": {
            name: {"status": doc["gates"][name]["status"], "measured": _key_figures(doc["gates"][name]["measured"])}
            for name in declared
            if name in doc["gates"]
        },
    }


def verify(resolved, bundle: Path) -> tuple[list[str], dict | None]:
    """(refusals, block written). Writes the block only when there are no refusals."""
    reasons = recheck(resolved, bundle)  # reads results.json itself, and says so when it cannot
    if repo_relative(bundle) is None:
        reasons.insert(
            0,
            f"the bundle {bundle} lies outside the repository {repo_root()}; a verified block may point only "
            "at evidence the repository holds: move the bundle under runs/ (or beside the recipe) and verify again",
        )
    doc = load_results(bundle) if not reasons else {}
    if not reasons:
        try:
            run_date(doc)
        except ValueError as e:
            reasons.append(f"{e}: the verified block records the day of the run")
    if reasons:
        return reasons, None
    block = block_for(resolved, doc, bundle)
    write_verified(resolved.path, block)
    return [], block
