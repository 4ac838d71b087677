"""`--set KEY=VALUE`: the one place command-line overrides are parsed, refused and applied
to a recipe's merged data (before it is validated)."""

from __future__ import annotations

import copy
import difflib
import math
import re
from typing import Any

import yaml

from cookbook.recipe import errors as E
from cookbook.recipe import expr, shell
from cookbook.recipe.model import ENV_NAME, FLAG_KEY, NAME_FORMS, Recipe, json_schema
from cookbook.recipe.validation import schema_node

OPEN_MAPS = ("serve.args", "env")  # --set may add new keys here; elsewhere the schema decides


def apply_sets(data: dict, sets: list[str]) -> tuple[dict, list[E.Diagnostic]]:
    """`data` with every --set applied (a copy), and a diagnostic for each one refused."""
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
    node = schema_node(tuple(parent.split(".")) if parent else (), json_schema())
    return leaf in node.get("properties", {})


def _leaf_keys(data: Any, prefix: str = "") -> list[str]:
    if isinstance(data, dict) and not ("value" in data and prefix):
        out = []
        for k, v in data.items():
            out += _leaf_keys(v, f"{prefix}.{k}" if prefix else k)
        return out
    return [prefix]
