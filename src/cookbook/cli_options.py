"""What several command modules share: the recipe options (--quant, --set), the refusal of a recipe
that does not resolve, and the check of a number of seconds. Only the command modules import it, and
no command module imports another (tests/test_layering.py)."""

from __future__ import annotations

import math

import click

from cookbook.recipe import errors as E


def resolve_or_refuse(slug, quant, sets, action):
    """The resolved recipe; a refusal is printed as `error: <action>` and its diagnostics (exit 2)."""
    from cookbook.recipe.resolve import resolve

    try:
        return resolve(slug, quant, sets)
    except E.RecipeError as exc:
        raise exc.refusing(action) from None


quant_option = click.option("--quant", "-q", help="A quant option of the recipe (default: the recipe's default).")
set_option = click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a setting, e.g. --set serve.args.max_model_len=8192 "
    "(a bare flag name means serve.args, an UPPER name means env).",
)


def finite(param, value):
    """click's FloatRange lets nan through (every comparison with it is false)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds", param=param)
    return value
