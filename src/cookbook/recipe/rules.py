"""A recipe's `conflicts`/`requires` rules: `{KEY.why}` citations filled as the chain merges,
then each rule evaluated against the resolved recipe, a fired one a refusal with its
`{dotted.key}` placeholders filled in."""

from __future__ import annotations

import copy
import re
from typing import Any

from cookbook import platforms
from cookbook.recipe import errors as E
from cookbook.recipe import expr
from cookbook.recipe.model import Recipe

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


def check_rules(recipe: Recipe, data: dict, quant: str | None, locate) -> list[E.Diagnostic]:
    """A refusal for every rule that fires on the resolved recipe (or whose expression is bad)."""
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


PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")


def fill(message: str, ctx: dict[str, Any]) -> str:
    def sub(m):
        value = expr.lookup(ctx, m.group(1))
        return m.group(0) if value is expr.MISSING else str(value)

    return PLACEHOLDER.sub(sub, message)


def fill_shown(message: str, ctx: dict[str, Any]) -> str:
    """A rule's message or help as `show` and the pages print it: its placeholders filled with the
    recipe's values; a key the recipe does not set reads "not set" (never a bare `{dotted.key}`)."""
    return PLACEHOLDER.sub("not set", fill(message, ctx))
