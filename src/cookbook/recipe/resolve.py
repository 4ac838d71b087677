"""Resolve a recipe: extends chain -> quant -> --set -> validation -> rules.

`resolve()` is what every command calls; it loads nothing but YAML and never touches a
model or an engine. Problems are collected and raised together as one RecipeError.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cookbook import platforms
from cookbook.recipe import errors as E
from cookbook.recipe import expr, paths, shell
from cookbook.recipe.model import ENV_NAME, FLAG_KEY, NAME_FORMS, SLUG, Recipe, json_schema
from cookbook.recipe.yaml_source import SourceFile, load

NOT_INHERITED = ("name", "abstract", "verified")
OPEN_MAPS = ("serve.args", "env")  # --set may add new keys here; elsewhere the schema decides


@dataclass
class ResolvedRecipe:
    slug: str
    path: Path
    chain: list[SourceFile]  # root base first, this recipe last
    data: dict[str, Any]  # resolved plain data (what `show` prints)
    recipe: Recipe
    quant: str | None
    sets: list[str] = field(default_factory=list)

    @property
    def content_hash(self) -> str:
        return content_hash({**self.data, "selected_quant": self.quant})

    def where(self, key: str) -> tuple[Path, int, int]:
        """File and position that defined `key` (the nearest recipe in the chain)."""
        return locator(self.chain)(key)


def content_hash(data: dict[str, Any]) -> str:
    """sha256 over the canonical JSON of the resolved recipe, minus its verified block."""
    body = {k: v for k, v in data.items() if k != "verified"}
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _has_key(data: Any, dotted: str) -> bool:
    return expr.lookup(data, dotted) is not expr.MISSING if dotted else True


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
            line, col = src.where("extends")
            raise E.RecipeError(
                [
                    E.Diagnostic(
                        E.EXTENDS_UNKNOWN,
                        "extends",
                        f"must be a recipe slug (got {parent!r})",
                        "name a folder under recipes/: lowercase letters, digits and -, no / or ..",
                        src.path,
                        line,
                        col,
                    )
                ]
            )
        parent_path = paths.recipes_dir() / parent / "recipe.yaml"
        if not parent_path.is_file() or not _inside(parent_path, paths.recipes_dir()):
            raise E.RecipeError([_unknown_recipe(parent, "extends", src, E.EXTENDS_UNKNOWN)])
        if str(parent_path.resolve()) in seen:
            line, col = src.where("extends")
            raise E.RecipeError(
                [
                    E.Diagnostic(
                        E.EXTENDS_CYCLE,
                        "extends",
                        f"{parent!r} extends back to this recipe",
                        "remove one `extends` of the loop",
                        src.path,
                        line,
                        col,
                    )
                ]
            )
        path = parent_path


def _inside(path: Path, root: Path) -> bool:
    """True when `path`, links resolved, lies inside `root` (a recipe folder may not be a
    link to a file elsewhere)."""
    return path.resolve().is_relative_to(root.resolve())


def merge_chain(chain: list[SourceFile]) -> dict[str, Any]:
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


# `{serve.args.block_size.why}` in a rule's message or help cites that setting's `why`, so a
# refusal quotes the reason without a second copy of it. Filled as the chain merges, against
# the recipe that writes the rule (a variant that rewords the setting's why for its own case
# does not reword an inherited rule), before quants and --set; show, docs and the content
# hash see the quoted text itself.
WHY_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\.why\}")


def why_of(data: dict[str, Any], dotted: str) -> str | None:
    """The `why` of the {value, why} setting at `dotted`, or None."""
    node = expr.lookup(data, dotted, unwrap=False)
    why = node.get("why") if isinstance(node, dict) and "value" in node else None
    return why if isinstance(why, str) else None


def cite_whys(rules: list, data: dict[str, Any]) -> list:
    """`rules` with every `{KEY.why}` of their message and help filled from `data` (an
    unknown KEY stays as written; lint reports it)."""
    out = []
    for rule in rules:
        if isinstance(rule, dict):
            rule = {
                k: (
                    WHY_REF.sub(lambda m: why_of(data, m.group(1)) or m.group(0), v)
                    if k in ("message", "help") and isinstance(v, str)
                    else v
                )
                for k, v in rule.items()
            }
        out.append(rule)
    return out


# ---- validation -> diagnostics --------------------------------------------------------


def _schema_node(loc: tuple, schema: dict) -> dict:
    """The JSON-schema node at `loc` (for listing legal keys in a help line)."""
    defs = schema.get("$defs", {})
    node = schema

    def deref(n: dict) -> dict:
        while "$ref" in n:
            n = defs[n["$ref"].rsplit("/", 1)[-1]]
        for alt in n.get("anyOf", []):
            alt = deref(alt)
            if "properties" in alt or "additionalProperties" in alt or "patternProperties" in alt:
                return alt
        return n

    for part in loc:
        node = deref(node)
        if isinstance(part, int):
            node = node.get("items", {})
        elif part in node.get("properties", {}):
            node = node["properties"][part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        elif len(node.get("patternProperties", {})) == 1:  # a map whose keys have a form
            node = next(iter(node["patternProperties"].values()))
        else:
            return {}
    return deref(node)


def _member_name(p) -> bool:
    return not isinstance(p, int) and (p[:1].isupper() or "[" in p or p.startswith("function-"))


def _clean_loc(loc: tuple, data: Any = None) -> tuple:
    # pydantic inserts union-member and validator names into loc; keep only data keys
    # (a key the data has is kept even when it looks like a member name: env.HF_HOME).
    out = []
    node = data
    for p in loc:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and isinstance(p, int) and 0 <= p < len(node):
            node = node[p]
        elif _member_name(p):
            continue
        else:
            node = None
        out.append(p)
    return tuple(out)


def validation_diagnostics(exc: ValidationError, locate, data: Any = None) -> list[E.Diagnostic]:
    schema = json_schema()
    out: list[E.Diagnostic] = []
    seen = set()
    for err in exc.errors():
        loc = _clean_loc(err["loc"], data)
        dotted = ".".join(str(p) for p in loc)
        key = (dotted, err["type"])
        if key in seen:
            continue
        seen.add(key)
        file, line, col = locate(dotted)
        pattern = (err.get("ctx") or {}).get("pattern")
        if err["type"] == "control_character" or pattern == shell.NO_CONTROL:
            ch = shell.control_char(str(err.get("input", ""))) or "?"
            out.append(
                E.Diagnostic(
                    E.SHELL_CONTROL_CHAR,
                    dotted,
                    f"the value holds the control character '{ch}'",
                    shell.CONTROL_HELP,
                    file,
                    line,
                    col,
                )
            )
        elif err["type"] == "string_pattern_mismatch" and pattern in NAME_FORMS:
            what, form = NAME_FORMS[pattern]
            out.append(
                E.Diagnostic(
                    E.BAD_NAME,
                    dotted,
                    f"{err.get('input')!r} is not {what} (names go into the launch block as they are)",
                    f"write it as {form}",
                    file,
                    line,
                    col,
                )
            )
        elif err["type"] == "extra_forbidden":
            legal = sorted(_schema_node(loc[:-1], schema).get("properties", {}))
            close = difflib.get_close_matches(str(loc[-1]), legal, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            out.append(
                E.Diagnostic(
                    E.UNKNOWN_KEY,
                    dotted,
                    f"unknown key {loc[-1]!r}",
                    f"{hint}legal keys here: {', '.join(legal)}",
                    file,
                    line,
                    col,
                )
            )
        elif err["type"] == "missing":
            out.append(
                E.Diagnostic(
                    E.MISSING_KEY,
                    dotted,
                    "required key is missing",
                    _schema_node(loc, schema).get("description"),
                    file,
                    line,
                    col,
                )
            )
        elif loc[:1] == ("schema_version",):
            out.append(
                E.Diagnostic(
                    E.SCHEMA_VERSION,
                    dotted,
                    f"unsupported schema_version {err.get('input')!r}",
                    "write `schema_version: 1`",
                    file,
                    line,
                    col,
                )
            )
        else:
            msg = err["msg"].removeprefix("Value error, ")
            got = err.get("input")
            got = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
            out.append(
                E.Diagnostic(
                    E.BAD_VALUE, dotted, f"{msg}{got}", _schema_node(loc, schema).get("description"), file, line, col
                )
            )
    # Report in file order.
    out.sort(key=lambda d: (str(d.file), d.line or 0, d.col or 0))
    return out


def validate(data: dict[str, Any], locate) -> tuple[Recipe | None, list[E.Diagnostic]]:
    if "schema_version" not in data:
        file, line, col = locate("")
        return None, [
            E.Diagnostic(
                E.SCHEMA_VERSION,
                "schema_version",
                "schema_version is missing",
                "add `schema_version: 1` as the first key",
                file,
                line,
                col,
            )
        ]
    try:
        return Recipe.model_validate(data), []
    except ValidationError as exc:
        return None, validation_diagnostics(exc, locate, data)


# ---- quant, --set, rules ----------------------------------------------------------------


def _recipes_offering(quant: str, family: str, min_gpus: int) -> list[str]:
    out = []
    for slug in all_slugs():
        try:
            data = merge_chain(load_chain(slug))
        except E.RecipeError:
            continue
        if data.get("abstract"):
            continue
        if (
            data.get("model", {}).get("family") == family
            and quant in data.get("quants", {})
            and data.get("hardware", {}).get("gpus", 0) >= min_gpus
        ):
            hw = data["hardware"]
            out.append(f"{slug} ({hw['gpus']}x {hw['platform']})")
    return out


def apply_quant(data: dict, quant: str | None, slug: str) -> tuple[dict, str | None, list[E.Diagnostic]]:
    quants = data.get("quants") or {}
    if not quants:
        if quant:
            return (
                data,
                None,
                [E.Diagnostic(E.UNKNOWN_QUANT, "quants", f"{slug} has no quant options", "leave out --quant")],
            )
        return data, None, []
    if quant is None:
        quant = next((q for q, spec in quants.items() if isinstance(spec, dict) and spec.get("default")), None)
        if quant is None:
            return data, None, []
    if quant not in quants:
        return (
            data,
            None,
            [
                E.Diagnostic(
                    E.UNKNOWN_QUANT,
                    "quants",
                    f"{slug} offers no quant {quant!r}",
                    f"{slug} offers: {', '.join(quants)}",
                )
            ],
        )
    spec = quants[quant]
    diags = []
    gpus = data.get("hardware", {}).get("gpus", 0)
    min_gpus = spec.get("min_gpus", 1)
    if isinstance(min_gpus, int) and isinstance(gpus, int) and min_gpus > gpus:
        why = f" ({spec['min_gpus_why']})" if spec.get("min_gpus_why") else ""
        others = _recipes_offering(quant, data.get("model", {}).get("family"), min_gpus)
        help = f"use {' or '.join(others)}" if others else f"choose one of: {', '.join(quants)}"
        diags.append(
            E.Diagnostic(
                E.QUANT_TOO_FEW_GPUS,
                f"quants.{quant}.min_gpus",
                f"{quant} needs {min_gpus}+ GPUs; {slug} has {gpus}{why}",
                help,
            )
        )
    if spec.get("overrides"):
        data = deep_merge(data, spec["overrides"])
    return data, quant, diags


def parse_set(item: str) -> tuple[str, Any]:
    key, eq, raw = item.partition("=")
    key = key.strip()
    if not eq or not key:
        raise E.RecipeError(
            [
                E.Diagnostic(
                    E.BAD_SET, "", f"--set {item!r} is not key=value", "write e.g. --set serve.args.max_model_len=8192"
                )
            ]
        )
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, RecursionError):  # not YAML (or nested past the parser's depth): the text itself
        value = raw
    problem = _bad_set_value(value)
    if problem:
        raise E.RecipeError(
            [
                E.Diagnostic(
                    E.BAD_SET,
                    key,
                    f"--set {key}: {problem}",
                    "write a plain value, e.g. --set serve.args.max_num_seqs=16",
                )
            ]
        )
    return key, value


MAX_SET_VALUES = 10_000  # items in one --set value, counting what YAML aliases repeat


def _bad_set_value(value: Any) -> str | None:
    """Why a parsed --set value cannot be a setting: a non-finite number, or too many items."""
    stack, seen = [value], 0
    while stack:
        v = stack.pop()
        seen += 1
        if seen > MAX_SET_VALUES:
            return f"the value holds more than {MAX_SET_VALUES} items"
        if isinstance(v, float) and not math.isfinite(v):
            return f"{v!r} is not a finite number"
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


def apply_sets(data: dict, sets: list[str]) -> tuple[dict, list[E.Diagnostic]]:
    diags = []
    data = copy.deepcopy(data)
    top_level = set(Recipe.model_fields)
    for item in sets:
        try:
            key, value = parse_set(item)
        except E.RecipeError as exc:
            diags += exc.diagnostics
            continue
        unsafe = _unsafe_set(item, key, value)
        if unsafe is not None:
            diags.append(unsafe)
            continue
        shorthand = "." not in key and key not in top_level
        if shorthand:
            # A bare flag name means serve.args, an UPPER name means env; shorthand only
            # changes keys the recipe has (a new flag needs the full serve.args.NAME path).
            key = f"env.{key}" if key.isupper() else f"serve.args.{key}"
        parent, _, leaf = key.rpartition(".")
        container = _raw(data, parent)
        open_map = parent in OPEN_MAPS and not shorthand
        if not isinstance(container, dict) or (
            leaf not in container and not open_map and not _schema_allows(parent, leaf)
        ):
            known = sorted(_leaf_keys(data))
            close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
            diags.append(
                E.Diagnostic(
                    E.UNKNOWN_SET_KEY,
                    key,
                    f"--set {item!r}: the recipe has no key {key!r}",
                    f"did you mean {', '.join(close)}?" if close else "`cookbook show SLUG` lists every key",
                )
            )
            continue
        current = container.get(leaf)
        if isinstance(current, dict) and "value" in current:
            container[leaf] = {"value": value, "why": f"set on the command line (--set {item})"}
        elif parent in OPEN_MAPS:
            container[leaf] = {"value": value, "why": f"set on the command line (--set {item})"}
        else:
            container[leaf] = value
    return data, diags


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _unsafe_set(item: str, key: str, value: Any) -> E.Diagnostic | None:
    """A --set whose key or value could not be rendered into the launch block as it is."""
    for text in (key, *_strings(value)):
        ch = shell.control_char(text)
        if ch is not None:
            return E.Diagnostic(
                E.BAD_SET, key, f"--set {item!r}: holds the control character '{ch}'", shell.CONTROL_HELP
            )
    parent, _, leaf = key.rpartition(".")
    if "." not in key and key not in Recipe.model_fields:  # shorthand: UPPER is env, else a flag
        parent = "env" if key.isupper() else "serve.args"
    pattern = {"env": ENV_NAME, "serve.args": FLAG_KEY}.get(parent)
    if pattern is not None and not re.fullmatch(pattern, leaf):
        what, form = NAME_FORMS[pattern]
        return E.Diagnostic(E.BAD_SET, key, f"--set {item!r}: {leaf!r} is not {what}", f"write it as {form}")
    return None


def _raw(data: dict, dotted: str) -> Any:
    """The container at a dotted key as stored (settings not unwrapped), or None."""
    node = expr.lookup(data, dotted, unwrap=False)
    return None if node is expr.MISSING else node


def _schema_allows(parent: str, leaf: str) -> bool:
    node = _schema_node(tuple(parent.split(".")) if parent else (), json_schema())
    return leaf in node.get("properties", {})


def _leaf_keys(data: Any, prefix: str = "") -> list[str]:
    if isinstance(data, dict) and not ("value" in data and prefix):
        out = []
        for k, v in data.items():
            out += _leaf_keys(v, f"{prefix}.{k}" if prefix else k)
        return out
    return [prefix]


def rule_context(recipe: Recipe, data: dict, quant: str | None) -> dict[str, Any]:
    ctx = copy.deepcopy(data)
    q = dict(data.get("quants", {}).get(quant, {})) if quant else {}
    q["name"] = quant
    ctx["quant"] = q
    plat = platforms.get(recipe.hardware.platform)
    ctx["platform"] = {
        "id": recipe.hardware.platform,
        "arch": plat.arch if plat else None,
        "memory_gib": plat.memory_gib if plat else None,
        "vendor": plat.vendor if plat else None,
    }
    return ctx


_PLACEHOLDER = __import__("re").compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")


def fill(message: str, ctx: dict[str, Any]) -> str:
    def sub(m):
        value = expr.lookup(ctx, m.group(1))
        return m.group(0) if value is expr.MISSING else str(value)

    return _PLACEHOLDER.sub(sub, message)


def check_rules(recipe: Recipe, data: dict, quant: str | None, locate) -> list[E.Diagnostic]:
    ctx = rule_context(recipe, data, quant)
    out = []
    for i, rule in enumerate(recipe.rules):
        file, line, col = locate(f"rules.{i}")
        try:
            fired = bool(expr.evaluate(rule.when, ctx))
            if fired and rule.kind == "requires":
                fired = not bool(expr.evaluate(rule.require, ctx))
        except expr.ExprError as exc:
            out.append(
                E.Diagnostic(
                    E.BAD_EXPRESSION, f"rules.{i}", str(exc), "see docs/rules.md for the rule language", file, line, col
                )
            )
            continue
        if fired:
            text = fill(rule.message, ctx)
            if rule.source:
                text += f" [{rule.source}]"
            out.append(
                E.Diagnostic(
                    E.RULE_REFUSED,
                    f"rules.{rule.id}",
                    text,
                    fill(rule.help, ctx) if rule.help else None,
                    file,
                    line,
                    col,
                )
            )
    return out


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
    if check:
        if recipe.abstract:
            diags.append(
                E.Diagnostic(
                    E.ABSTRACT_RECIPE,
                    "abstract",
                    f"{name} is a base for variants",
                    "use a recipe that extends it: " + ", ".join(s for s in all_slugs() if _extends(s, name)) or None,
                )
            )
        diags += check_rules(recipe, data, chosen, locate)
        if diags:
            raise E.RecipeError(diags)
    return resolved_from(chain, data, recipe, chosen, sets)


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
    return ResolvedRecipe(leaf.path.parent.name, leaf.path, chain, normalized, recipe, quant, list(sets))


def _extends(slug: str, parent: str) -> bool:
    try:
        return load(paths.recipe_file(slug)).data.get("extends") == parent
    except E.RecipeError:
        return False
