"""Choosing a recipe's quant: the default or the one asked for, refused on too few GPUs
(naming the recipes that have enough), its overrides merged in."""

from __future__ import annotations

from cookbook.recipe import errors as E
from cookbook.recipe.chain import all_slugs, deep_merge, load_chain, merge_chain


def apply_quant(data: dict, quant: str | None, slug: str) -> tuple[dict, str | None, list[E.Diagnostic]]:
    """`data` with the chosen quant's overrides merged in, the quant chosen (None when the
    recipe offers none), and why it is refused."""
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
