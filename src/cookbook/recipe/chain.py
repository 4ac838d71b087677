"""A recipe's `extends` chain: loading it (root base first), merging it into one mapping,
and finding which file of the chain sets a key."""

from __future__ import annotations

import copy
import difflib
import re
from pathlib import Path
from typing import Any

from cookbook.recipe import errors as E
from cookbook.recipe import expr, paths
from cookbook.recipe.model import SLUG
from cookbook.recipe.rules import cite_whys
from cookbook.recipe.yaml_source import SourceFile, load

NOT_INHERITED = ("name", "abstract", "verified")


def all_slugs() -> list[str]:
    root = paths.recipes_dir()
    if not root.is_dir():
        return []
    return sorted(p.parent.name for p in root.glob("*/recipe.yaml"))


def _unknown_recipe(
    slug: str, key: str = "", src: SourceFile | None = None, kind: E.ErrorKind = E.UNKNOWN_RECIPE
) -> E.Diagnostic:
    close = difflib.get_close_matches(slug, all_slugs(), n=3, cutoff=0.5)
    help = f"did you mean {', '.join(close)}?" if close else "run `cookbook list` to see every recipe"
    line, col = src.where(key) if src else (None, None)
    return E.Diagnostic(
        kind,
        key,
        f"no recipe named {slug!r} (no recipes/{slug}/recipe.yaml)",
        help,
        src.path if src else None,
        line,
        col,
    )


def load_chain(slug_or_path: str | Path) -> list[SourceFile]:
    """A recipe (a slug or a file) and every recipe it extends, root base first."""
    path = Path(slug_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = paths.recipe_file(str(slug_or_path))
        if not re.fullmatch(SLUG, str(slug_or_path)) or not path.is_file() or not _inside(path, paths.recipes_dir()):
            raise E.RecipeError([_unknown_recipe(str(slug_or_path))])
    chain: list[SourceFile] = []
    seen: list[str] = []
    while True:
        src = load(path)
        chain.insert(0, src)
        seen.append(str(path.resolve()))
        parent = src.data.get("extends")
        if parent is None:
            return chain
        if not isinstance(parent, str) or not re.fullmatch(SLUG, parent):
            raise _bad_extends(
                src,
                E.EXTENDS_UNKNOWN,
                f"must be a recipe slug (got {parent!r})",
                "name a folder under recipes/: lowercase letters, digits and -, no / or ..",
            )
        parent_path = paths.recipes_dir() / parent / "recipe.yaml"
        if not parent_path.is_file() or not _inside(parent_path, paths.recipes_dir()):
            raise E.RecipeError([_unknown_recipe(parent, "extends", src, E.EXTENDS_UNKNOWN)])
        if str(parent_path.resolve()) in seen:
            raise _bad_extends(
                src, E.EXTENDS_CYCLE, f"{parent!r} extends back to this recipe", "remove one `extends` of the loop"
            )
        path = parent_path


def _bad_extends(src: SourceFile, kind: E.ErrorKind, problem: str, help: str) -> E.RecipeError:
    """The refusal of `src`'s `extends`, at its line."""
    return E.RecipeError([E.Diagnostic(kind, "extends", problem, help, src.path, *src.where("extends"))])


def _inside(path: Path, root: Path) -> bool:
    """True when `path`, links resolved, lies inside `root` (a recipe folder may not be a
    link to a file elsewhere)."""
    return path.resolve().is_relative_to(root.resolve())


def merge_chain(chain: list[SourceFile]) -> dict[str, Any]:
    """The chain merged into one mapping, base first (`name`, `abstract` and `verified` are
    not inherited; `extends` is the leaf's)."""
    data: dict[str, Any] = {}
    for i, src in enumerate(chain):
        layer = dict(src.data)
        if i < len(chain) - 1:
            for key in NOT_INHERITED:
                layer.pop(key, None)
        if isinstance(layer.get("rules"), list):
            layer["rules"] = cite_whys(layer["rules"], deep_merge(data, layer))
        data = deep_merge(data, layer)
    data.pop("extends", None)
    if len(chain) > 1:
        data["extends"] = chain[-1].data.get("extends")
    return data


def deep_merge(base: dict, over: dict) -> dict:
    """Mappings merge key by key; `rules` merge by rule id (a child's rule with a parent's
    id replaces it, new ids are appended); any other list is replaced."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and not _is_setting(value):
            out[key] = deep_merge(out[key], value)
        elif key == "rules" and isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = _merge_rules(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_rules(base: list, over: list) -> list:
    merged = copy.deepcopy(base)
    index = {r.get("id"): i for i, r in enumerate(merged) if isinstance(r, dict)}
    for rule in over:
        rid = rule.get("id") if isinstance(rule, dict) else None
        if rid is not None and rid in index:
            merged[index[rid]] = copy.deepcopy(rule)
        else:
            merged.append(copy.deepcopy(rule))
    return merged


def _is_setting(value: dict) -> bool:
    return "value" in value


def locator(chain: list[SourceFile]):
    """dotted key -> (file, line, col) of the nearest recipe in the chain that sets it
    (the leaf, at its nearest present ancestor key, when none does)."""
    leaf = chain[-1]

    def locate(dotted: str) -> tuple[Path, int, int]:
        for src in reversed(chain):
            if _has_key(src.data, dotted):
                return (src.path, *src.where(dotted))
        return (leaf.path, *leaf.where(dotted))

    return locate


def _has_key(data: Any, dotted: str) -> bool:
    return expr.lookup(data, dotted) is not expr.MISSING if dotted else True


def _extends(slug: str, parent: str) -> bool:
    try:
        return load(paths.recipe_file(slug)).data.get("extends") == parent
    except E.RecipeError:
        return False


def variants(name: str) -> list[str]:
    """The recipes whose `extends` names `name`."""
    return [s for s in all_slugs() if _extends(s, name)]
