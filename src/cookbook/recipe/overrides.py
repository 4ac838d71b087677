"""`--set KEY=VALUE`: the one place command-line overrides are parsed, refused and applied
to a recipe's merged data (before it is validated)."""

from __future__ import annotations

import copy
import difflib
import functools
import json
import math
import re
from typing import Any

import yaml

from cookbook.recipe import errors as E
from cookbook.recipe import expr, flags, shell
from cookbook.recipe.model import ENV_NAME, FLAG_KEY, NAME_FORMS, Recipe, json_schema
from cookbook.recipe.validation import schema_node

OPEN_MAPS = ("serve.args", "env")  # --set may add new keys here; elsewhere the schema decides
# Top-level keys --set may not touch, and why: the block is evidence, written only from a bundle.
UNSETTABLE = {
    "verified": (
        "only `cookbook gates verify` writes the verified block, from an evidence bundle",
        "change the recipe's settings (serve.args, env, ...); the verified block follows from its gates",
    ),
    # The platform is what the recipe's image, flags and header are for (an 8x H200 block stays one).
    "hardware.platform": (
        "the platform is the recipe's identity: its image, flags and page are for it",
        "use the recipe for that platform (`cookbook list`), or `cookbook plan SLUG --platform P` for a what-if",
    ),
}


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
        if _is_setting(container) and parent.count(".") >= 1:
            diags.append(
                E.Diagnostic(
                    E.BAD_SET,
                    key,
                    f"--set {item!r}: {parent} is one setting; its parts cannot be set one by one",
                    f"set its whole value, e.g. --set '{parent}={{...}}' (`cookbook show SLUG` prints the current one)",
                )
            )
            continue
        open_map = parent in OPEN_MAPS and not shorthand
        known = parent == "serve.args" and leaf in flags.catalogue()
        if not isinstance(container, dict) or (
            leaf not in container
            and not known
            and not (open_map and parent == "env")
            and not _schema_allows(parent, leaf)
        ):
            diags.append(_unknown(item, key, data))
            continue
        problem = _type_problem(parent, leaf, value, container.get(leaf))
        if problem:
            diags.append(
                E.Diagnostic(
                    E.BAD_SET,
                    key,
                    f"--set {item!r}: {key} {problem}",
                    "`cookbook show SLUG` prints each setting's value and why; null removes a flag",
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


def _is_setting(node: Any) -> bool:
    return isinstance(node, dict) and "value" in node and set(node) <= {"value", "why", "source"}


def _unknown(item: str, key: str, data: dict) -> E.Diagnostic:
    """An unknown key, with the nearest keys of the recipe and of vLLM's flags."""
    known = set(_leaf_keys(data)) | {f"serve.args.{k}" for k in flags.catalogue()}
    close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.6)
    if not close and "." not in key:
        close = [f"serve.args.{k}" for k in difflib.get_close_matches(key, sorted(flags.catalogue()), n=3)]
    return E.Diagnostic(
        E.UNKNOWN_SET_KEY,
        key,
        f"--set {item!r}: the recipe has no key {key!r}" + (", and vLLM has no such flag" if "args" in key else ""),
        f"did you mean {', '.join(close)}?" if close else "`cookbook show SLUG` lists every key",
    )


_JSON_KINDS = (
    (bool, "true or false"),
    ((int, float), "a number"),
    (str, "a string"),
    (dict, "a mapping"),
    (list, "a list"),
)


def _kind(value: Any) -> str | None:
    for types, name in _JSON_KINDS:
        if isinstance(value, types):
            return name
    return None


def _numeric(v: Any) -> bool:
    """A number, or text that is one ("2", "0.2"), as env values often are."""
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    try:
        return isinstance(v, str) and math.isfinite(float(v))
    except ValueError:
        return False


def _type_problem(parent: str, leaf: str, value: Any, current: Any) -> str | None:
    """Why `value` cannot go at parent.leaf, or None. vLLM's flags are typed by the flag catalogue,
    a fork's flag by the recipe's own value, env by being a scalar, everything else by the
    generated schema (jsonschema). null is always allowed in serve.args and env: it unsets."""
    if parent in OPEN_MAPS and value is None:
        return None
    if parent == "serve.args":
        if leaf in flags.catalogue():
            return flags.problem(leaf, value)
        was = current.get("value") if _is_setting(current) else current
        if was is not None and _kind(was) != _kind(value):
            return f"expected {_kind(was)} like the recipe's {json.dumps(was)[:40]}, got {json.dumps(value)[:40]}"
        return None
    if parent == "env":
        if _kind(value) not in ("true or false", "a number", "a string"):
            return "expected a string or a number"
        was = current.get("value") if _is_setting(current) else current
        if _numeric(was) and not _numeric(value):  # the planner reads some as numbers (VLLM_CPU_KVCACHE_SPACE)
            return f"expected a number like the recipe's {json.dumps(was)}, got {json.dumps(value)[:40]}"
        return None
    return _schema_problem(f"{parent}.{leaf}" if parent else leaf, value)


def _schema_problem(dotted: str, value: Any) -> str | None:
    from jsonschema.exceptions import best_match

    validator = _schema_validator(dotted)
    error = best_match(validator.iter_errors(value)) if validator else None
    return f"is refused by the recipe schema: {error.message[:200]}" if error else None


@functools.lru_cache(maxsize=256)
def _schema_validator(dotted: str):
    """jsonschema's validator of the generated schema's node at `dotted` (None where it has none)."""
    import jsonschema

    schema = json_schema()
    node = schema_node(tuple(dotted.split(".")), schema)
    return jsonschema.Draft202012Validator({"$defs": schema["$defs"], **node}) if node else None


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
    problem = None
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, RecursionError):  # not YAML (or nested past the parser's depth): the text itself
        value = raw
    except ValueError:  # an integer past Python's digit limit (int-string conversion)
        value, problem = raw, f"a number of {len(raw.strip()):,} characters is past any setting's range"
    if problem is None and isinstance(value, int) and not isinstance(value, bool):
        if not re.fullmatch(r"[-+]?(?:0|[1-9][0-9]*)", raw.strip()):
            # YAML 1.1 reads 0x100 as 256, 010 as 8, 1_000 as 1000 and 1:30 as 90: say so, never guess
            problem = f"{raw.strip()[:40]!r} is read by YAML as the integer {value}; write integers in plain decimal"
    problem = problem or _bad_set_value(value)
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
    for fixed, (why, fix) in UNSETTABLE.items():
        if key == fixed or key.startswith(fixed + ".") or fixed.startswith(key + "."):
            return E.Diagnostic(E.BAD_SET, key, f"--set {item!r}: {fixed} is not a setting: {why}", fix)
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
