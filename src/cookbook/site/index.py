"""docs/index.md: the hardware x model matrix with each recipe's status, every recipe, and
the comparison pages."""

from __future__ import annotations

from cookbook.evidence.status import status_of
from cookbook.site.compare import groups
from cookbook.site.markdown import MARKER, badge, cell, hardware_label


def index_page(slugs: list[str]) -> str:
    recipes, compared = groups(slugs)
    status = {x.slug: status_of(x) for x in recipes}
    models: list[str] = []
    hardware: list[str] = []
    for x in recipes:
        models += [x.recipe.model.name] if x.recipe.model.name not in models else []
        hw = hardware_label(x.recipe)
        hardware += [hw] if hw not in hardware else []
    lines = [MARKER, "# Recipes", ""]
    lines += [
        "Every recipe by hardware and model, with its status: *verified* only while its evidence "
        "bundle is there and passes the re-check; *stale* when the recipe changed after it.",
        "",
        "| hardware | " + " | ".join(cell(m) for m in models) + " |",
        "|---|" + "---|" * len(models),
    ]
    order = {hardware_label(x.recipe): (x.recipe.hardware.platform, x.recipe.hardware.gpus) for x in recipes}
    for hw in sorted(hardware, key=order.__getitem__):
        row = []
        for model in models:
            here = [x for x in recipes if x.recipe.model.name == model and hardware_label(x.recipe) == hw]
            row.append("<br>".join(f"[{x.slug}](recipes/{x.slug}.md) {badge(status[x.slug])}" for x in here))
        lines.append(f"| {hw} | " + " | ".join(row) + " |")
    lines += ["", "## Every recipe", "", "| recipe | model | hardware | status |", "|---|---|---|---|"]
    for x in recipes:
        r = x.recipe
        lines.append(f"| [{x.slug}](recipes/{x.slug}.md) | {r.model.name} | {hardware_label(r)} | {status[x.slug]} |")
    if compared:
        lines += ["", "## Variants compared", ""]
        lines += [f"- [{b}](compare/{b}.md): " + ", ".join(x.slug for x in members) for b, members in compared.items()]
    lines += ["", "See also [errors](errors.md) and [the rule language](rules.md).", ""]
    return "\n".join(lines)
