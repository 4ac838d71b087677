"""Resolve a recipe: extends chain -> quant -> --set -> validation -> rules.

`resolve()` is what every command calls; it loads nothing but YAML and never touches a
model or an engine. Problems are collected and raised together as one RecipeError. Each
step is its own module: chain (extends), quants, overrides (--set), validation, rules.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cookbook.recipe import errors as E
from cookbook.recipe.chain import all_slugs, load_chain, locator, merge_chain, variants
from cookbook.recipe.model import Recipe
from cookbook.recipe.overrides import apply_sets
from cookbook.recipe.paths import repo_root
from cookbook.recipe.quants import apply_quant
from cookbook.recipe.rules import check_rules
from cookbook.recipe.used_files import used_files
from cookbook.recipe.validation import validate
from cookbook.recipe.yaml_source import SourceFile

__all__ = ["ResolvedRecipe", "all_slugs", "content_hash", "resolve", "resolved_from"]


@dataclass
class ResolvedRecipe:
    slug: str
    path: Path
    chain: list[SourceFile]  # root base first, this recipe last
    data: dict[str, Any]  # resolved plain data (what `show` prints)
    recipe: Recipe
    quant: str | None
    sets: list[str] = field(default_factory=list)
    # The checkout's files it serves with: {path: sha256:<hex>} (cookbook.recipe.used_files).
    files: dict[str, str] = field(default_factory=dict)

    @property
    def recorded(self) -> dict[str, Any]:
        """What a bundle records as recipe.resolved.json: the data, and the digests of its files."""
        return {**self.data, "used_files": self.files} if self.files else self.data

    @property
    def content_hash(self) -> str:
        return content_hash({**self.recorded, "selected_quant": self.quant})

    def where(self, key: str) -> tuple[Path, int, int]:
        """File and position that defined `key` (the nearest recipe in the chain)."""
        return locator(self.chain)(key)


def content_hash(data: dict[str, Any]) -> str:
    """sha256 over the canonical JSON of the resolved recipe, minus its verified block. The one
    recipe hash: ResolvedRecipe.content_hash passes it its `recorded` form (with `used_files`, the
    sha256 of every checkout file it serves with), and a bundle's recipe.resolved.json is that form."""
    body = {k: v for k, v in data.items() if k != "verified"}
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def resolve(
    slug: str | Path, quant: str | None = None, sets: list[str] | tuple = (), check: bool = True
) -> ResolvedRecipe:
    """The fully resolved recipe. Raises RecipeError with every problem found."""
    chain = load_chain(slug)
    leaf = chain[-1]
    name = leaf.path.parent.name

    locate = locator(chain)
    data = merge_chain(chain)
    data, chosen, diags = apply_quant(data, quant, name)
    data, set_diags = apply_sets(data, list(sets))
    diags += set_diags
    if diags and any(d.kind in (E.UNKNOWN_QUANT,) for d in diags):
        raise E.RecipeError(diags)
    recipe, val_diags = validate(data, locate)
    if val_diags:
        raise E.RecipeError(diags + val_diags)
    assert recipe is not None
    diags += file_diagnostics(data, locate)
    if any(d.kind is E.UNUSABLE_FILE for d in diags):
        raise E.RecipeError(diags)
    if check:
        if recipe.abstract:
            diags.append(
                E.Diagnostic(
                    E.ABSTRACT_RECIPE,
                    "abstract",
                    f"{name} is a base for variants",
                    "use a recipe that extends it: " + ", ".join(variants(name)) or None,
                )
            )
        diags += check_rules(recipe, data, chosen, locate)
        if diags:
            raise E.RecipeError(diags)
    return resolved_from(chain, data, recipe, chosen, sets)


def file_diagnostics(data: dict, locate) -> list[E.Diagnostic]:
    """One R025 for every file reference in serve/convert/env that cannot be hashed."""
    out = []
    for key, rel, why in used_files(data, repo_root())[1]:
        file, line, col = locate(key)
        out.append(
            E.Diagnostic(
                E.UNUSABLE_FILE,
                key,
                f"names {rel or '(nothing)'}, which {why}" if why.startswith("is ") else f"names {rel}: {why}",
                "name a regular file of the checkout as $COOKBOOK/<path> (at most 16 MiB, no `..`, "
                "no link leading out, no variables inside the path)",
                file,
                line,
                col,
            )
        )
    return out


def resolved_from(
    chain: list[SourceFile], data: dict, recipe: Recipe, quant: str | None, sets: list[str] | tuple = ()
) -> ResolvedRecipe:
    """The ResolvedRecipe of a chain already merged, quant-applied and validated (resolve's
    last step; lint calls it too, so it need not load and validate the file again)."""
    # Keep the resolved data normalized the way the model sees it (settings as {value, why}).
    normalized = recipe.model_dump(mode="json", exclude_none=True, exclude_defaults=False)
    normalized.pop("verified", None)
    if data.get("verified") is not None:
        normalized["verified"] = data["verified"]
    leaf = chain[-1]
    files = used_files(normalized, repo_root())[0]
    return ResolvedRecipe(leaf.path.parent.name, leaf.path, chain, normalized, recipe, quant, list(sets), files)
