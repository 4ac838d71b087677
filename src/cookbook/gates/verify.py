"""Earned verification: a recipe's `verified` block comes only from a passing evidence bundle.

The block is the last top-level key of recipe.yaml. Writing replaces everything from the
line `verified:` to the end of the file (or appends), so the rest of the file, comments
included, stays as written.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from cookbook.gates.bundle import load_results
from cookbook.gates.spec import GATE_NAMES

_VERIFIED_LINE = re.compile(r"^verified:", re.MULTILINE)


def verified_status(resolved) -> str:
    """The one definition lives in cookbook.recipe.status (list, lint and docs use it too)."""
    from cookbook.recipe.status import status_of

    return status_of(resolved)


def _served_name(resolved) -> str:
    serve = resolved.recipe.serve
    return str(serve.arg("served_model_name") or serve.model)


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
        out.append(f"the bundle ran on recipe {doc.get('recipe_hash')} but the recipe is now "
                   f"{resolved.content_hash}; run the gates again on the current recipe")
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
        out.append("the bundle records neither an environment lock nor an image digest "
                   "(pass --env-lock, --env-lock-cmd or --image-digest to `gates run`)")
    return out


def _key_figures(measured: dict) -> dict:
    return {k: v for k, v in measured.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}


def block_for(resolved, doc: dict, bundle: Path) -> dict[str, Any]:
    env = doc["environment"]
    environment = (f"image {env['digest']}" if env["kind"] == "image"
                   else f"env-lock sha256:{env['sha256']}")
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
        "gates": {name: {"status": doc["gates"][name]["status"],
                         "measured": _key_figures(doc["gates"][name]["measured"])}
                  for name in GATE_NAMES if name in doc["gates"]},
    }


def render_block(block: dict) -> str:
    text = yaml.safe_dump({"verified": block}, sort_keys=False, default_flow_style=False, width=100)
    return "# written by `cookbook gates verify` from an evidence bundle; do not edit by hand\n" + text


def with_block(recipe_text: str, block: dict) -> str:
    """recipe.yaml text with its verified block replaced (from `verified:` to EOF) or appended."""
    m = _VERIFIED_LINE.search(recipe_text)
    if m:
        rest = recipe_text[m.end():]
        later = re.search(r"^[A-Za-z_][\w-]*:", rest, re.MULTILINE)
        if later:
            raise ValueError(f"`verified:` must be the last top-level key, but {later.group(0)!r} follows it; "
                             "move that key above `verified:`")
    head = recipe_text[:m.start()] if m else recipe_text
    head = re.sub(r"# written by `cookbook gates verify`[^\n]*\n\Z", "", head)
    if head and not head.endswith("\n"):
        head += "\n"
    return head + render_block(block)


def write_verified(recipe_path: Path, block: dict) -> None:
    new = with_block(recipe_path.read_text(encoding="utf-8"), block)
    tmp = recipe_path.with_name(f".{recipe_path.name}.tmp")
    tmp.write_text(new, encoding="utf-8")
    os.replace(tmp, recipe_path)


def verify(resolved, bundle: Path) -> tuple[list[str], dict | None]:
    """(refusals, block written). Writes the block only when there are no refusals."""
    from cookbook.gates.evidence import recheck

    doc = load_results(bundle)
    reasons = recheck(resolved, bundle)
    if reasons:
        return reasons, None
    block = block_for(resolved, doc, bundle)
    write_verified(resolved.path, block)
    return [], block
