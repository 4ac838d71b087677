"""Validating merged recipe data against the model, and pydantic's errors as diagnostics:
each at the file, line and column that set the key, with the legal keys or the field's
description as help."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import ValidationError

from cookbook.recipe import errors as E
from cookbook.recipe import flags, shell
from cookbook.recipe.model import NAME_FORMS, Recipe, json_schema


def validate(data: dict[str, Any], locate) -> tuple[Recipe | None, list[E.Diagnostic]]:
    """The Recipe the data makes, or None and every problem, each placed by `locate`."""
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
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        return None, validation_diagnostics(exc, locate, data)
    typed = flag_diagnostics(recipe, locate)
    return (None, typed) if typed else (recipe, [])


def flag_diagnostics(recipe: Recipe, locate) -> list[E.Diagnostic]:
    """serve.args values of vLLM's flags checked against their types (cookbook.recipe.flags)."""
    out = []
    for key, setting in recipe.serve.args.items():
        problem = flags.problem(key, setting.value)
        if problem:
            dotted = f"serve.args.{key}"
            file, line, col = locate(dotted)
            out.append(
                E.Diagnostic(
                    E.BAD_VALUE,
                    dotted,
                    problem,
                    f"--{key.replace('_', '-')} takes {flags.describe(flags.catalogue()[key])}",
                    file,
                    line,
                    col,
                )
            )
    return out


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
            legal = sorted(schema_node(loc[:-1], schema).get("properties", {}))
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
                    schema_node(loc, schema).get("description"),
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
                    E.BAD_VALUE, dotted, f"{msg}{got}", schema_node(loc, schema).get("description"), file, line, col
                )
            )
    # Report in file order.
    out.sort(key=lambda d: (str(d.file), d.line or 0, d.col or 0))
    return out


def schema_node(loc: tuple, schema: dict) -> dict:
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
