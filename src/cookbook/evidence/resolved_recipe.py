"""recipe.resolved.json, the recipe the gates ran on: its content hash recomputed must equal the one
results.json records and the recipe's current one."""

from __future__ import annotations

from pathlib import Path

from cookbook.gates.recorded import read_json
from cookbook.recipe.resolve import content_hash


def check_resolved(root: Path, doc: dict, resolved) -> list[str]:
    f = root / "recipe.resolved.json"
    if not f.is_file():
        return ["recipe.resolved.json is missing, so the recipe the gates ran on cannot be checked"]
    try:
        data = read_json(f)
        if not isinstance(data, dict):
            raise ValueError("not a mapping")
    except (ValueError, UnicodeDecodeError) as e:
        return [f"recipe.resolved.json cannot be read ({e})"]
    got = content_hash({**data, "selected_quant": doc.get("quant")})
    out = []
    if got != doc.get("recipe_hash"):
        out.append(
            f"recipe.resolved.json hashes to {got}, results.json records {doc.get('recipe_hash')} "
            "(the resolved recipe was edited)"
        )
    if got != resolved.content_hash:
        out.append(f"recipe.resolved.json hashes to {got}, the recipe is now {resolved.content_hash}")
    return out
