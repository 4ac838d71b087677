"""docs/index.md: what can I run on my hardware. One matrix per model family (a row per model,
a column per hardware kind, H100 and H200 always among them), a hardware filter (a small script,
docs/assets/cookbook.js; without it every row shows), the benchmark-only recipes set apart, every
recipe as a list, and the comparison pages."""

from __future__ import annotations

import os

from cookbook import platforms
from cookbook.evidence.status import shown_status, status_of
from cookbook.plan import elsewhere
from cookbook.site.compare import groups
from cookbook.site.markdown import MARKER, badge, benchmark_reason, cell, hardware_label

ALWAYS = ("h100", "h200")  # the most common hardware: a column in every family's matrix
# The filter offers every kind of the catalogue, so an owner of one no recipe is written for (an
# A100 40GB) is told so, and what comes nearest.
FILTERED = tuple(platforms.CATALOGUE)
VENDORS = ("cpu", "nvidia", "amd", "intel")
PREFIXES = ("NVIDIA ", "AMD Instinct ", "AMD ", "Intel ")


def hw_label(platform_id: str) -> str:
    p = platforms.get(platform_id)
    if p is None:
        return platform_id
    name = p.name
    for prefix in PREFIXES:
        name = name.removeprefix(prefix)
    return "CPU" if p.vendor == "cpu" else name


def hw_order(platform_id: str) -> tuple:
    """CPU, then NVIDIA by architecture (sm80 before sm90 before sm120), AMD, Intel."""
    p = platforms.get(platform_id)
    arch = int("".join(c for c in p.arch if c.isdigit()) or 0) if p else 0
    return (VENDORS.index(p.vendor) if p and p.vendor in VENDORS else len(VENDORS), arch, platform_id)


def hw_cell(platform_id: str, text: str) -> str:
    """A cell the filter script reads: its hardware kind in data-hw."""
    return f'<span data-hw="{platform_id}">{text}</span>'


def family_title(names: list[str], family: str) -> str:
    """The family's heading: what its model names share ("GLM-5.2"), else its id."""
    common = os.path.commonprefix(names).rstrip(" -(,") if len(names) > 1 else names[0]
    return common or family


def family_titles(recipes) -> dict[str, str]:
    names: dict[str, list[str]] = {}
    for x in recipes:
        names.setdefault(x.recipe.model.family, [])
        if x.recipe.model.name not in names[x.recipe.model.family]:
            names[x.recipe.model.family].append(x.recipe.model.name)
    return {f: family_title(n, f) for f, n in names.items()}


def hardware_notes(platform_id: str, recipes, own: set[str]) -> list[str]:
    """What the filter says for one hardware kind (paragraphs the filter script shows when that kind
    is selected): when no recipe is written for it, that; the nearest recipes (written for a sibling
    of the same GPU kind whose plan fits as many of these, cookbook.plan.elsewhere); and the families
    none of whose checkpoints fits one such GPU, by the planner."""
    p = platforms.get(platform_id)
    if p is None or p.vendor == "cpu":
        return []
    label = hw_label(platform_id)
    out = []
    near = [(x, f) for x, f in elsewhere.candidates(platform_id, None, recipes) if f.verdict == elsewhere.PLAN]
    if not own:
        kin = sorted(
            (x for x in recipes if elsewhere.same_kind(x.recipe.hardware.platform, platform_id)),
            key=lambda x: (x.recipe.hardware.gpus, x.slug),
        )
        if near:
            then = "The nearest are below."
        elif kin:  # of its GPU kind, but no plan fits: the nearest by GPU count, and why not
            then = (
                "Of its GPU kind, "
                + ", ".join(
                    f"[{x.slug}](recipes/{x.slug}.md) ({hw_label(x.recipe.hardware.platform)})" for x in kin[:3]
                )
                + f" come nearest, but their plans do not fit as many {label}s (`cookbook list --platform {platform_id}`)."
            )
        else:
            then = "No recipe of its GPU kind exists either."
        out += [
            f"**No recipe is written for the {label} yet.** {then} "
            f"`cookbook plan SLUG --platform {platform_id}` plans any recipe on it.",
            f'{{: .cb-note .cb-empty data-hw-note="{platform_id}" }}',
            "",
        ]
    if near:
        sibling = sorted({x.recipe.hardware.platform for x, _ in near}, key=hw_order)
        out += [
            f"Nearest for the {label}: "
            + ", ".join(f"[{x.slug}](recipes/{x.slug}.md) ({x.recipe.hardware.gpus}x)" for x, _ in near)
            + f", written for the {' and '.join(hw_label(s) for s in sibling)}, the same GPU kind "
            f"({' '.join(elsewhere.kind(platform_id))}): each one's plan fits as many {label}s, not yet run there "
            f"(`cookbook list --platform {platform_id}`).",
            f'{{: .cb-note data-hw-note="{platform_id}" }}',
            "",
        ]
    titles = family_titles(recipes)
    fit = elsewhere.one_gpu_fit(recipes, platform_id)
    too_big = sorted((f for f, (fits, _) in fit.items() if not fits), key=lambda f: fit[f][1])
    if too_big:
        names = [titles.get(f, f) for f in too_big]
        which = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        sizes = ", ".join(f"{titles.get(f, f)} {fit[f][1]:g} GiB" for f in too_big)
        out += [
            f"None of {which} fits one {label}"
            + ("" if "GB" in label else f" ({p.memory_gib:g} GB)")
            + ": by the planner "
            f"(`cookbook plan SLUG --platform {platform_id} --gpus 1`), not even the smallest checkpoint of each "
            f"({sizes}).",
            f'{{: .cb-note data-hw-note="{platform_id}" }}',
            "",
        ]
    return out


def index_page(slugs: list[str]) -> str:
    recipes, compared = groups(slugs)
    # verified as it is; otherwise the engine check's word beside it, as `cookbook list` prints it
    status = {x.slug: shown_status(x, status_of(x)) for x in recipes}
    bench = [x for x in recipes if benchmark_reason(x.recipe)]
    real = [x for x in recipes if not benchmark_reason(x.recipe)]
    lines = [
        "---",
        "title: Recipes",
        "hide:",
        "  - navigation",
        "  - toc",
        "---",
        MARKER,
        "# Recipes",
        "",
        "What can I run on my hardware? One table per model family: a row per model, a column per hardware "
        "kind, each recipe with its status: *verified* only while its evidence bundle is there and passes "
        "the re-check; *stale* when the recipe changed after it. An empty cell has no recipe yet: "
        "`cookbook plan SLUG --platform h100` plans an existing one on other hardware.",
        "",
        '<div class="cb-filter" id="cb-filter" hidden><label>Hardware: <select id="cb-hw">'
        '<option value="">all</option>'
        + "".join(f'<option value="{p}">{hw_label(p)}</option>' for p in sorted(set(FILTERED), key=hw_order))
        + "</select></label></div>",
        "",
    ]
    for p in sorted(set(FILTERED), key=hw_order):
        lines += hardware_notes(p, real, {x.slug for x in real if x.recipe.hardware.platform == p})
    families: dict[str, list] = {}
    for x in real:
        families.setdefault(x.recipe.model.family, []).append(x)
    for family, members in families.items():
        models: list[str] = []
        for x in members:
            models += [x.recipe.model.name] if x.recipe.model.name not in models else []
        hws = sorted({x.recipe.hardware.platform for x in members} | set(ALWAYS), key=hw_order)
        lines += [f"## {family_title(models, family)}", ""]
        lines += ["| model | " + " | ".join(hw_cell(h, hw_label(h)) for h in hws) + " |"]
        lines += ["|---|" + "---|" * len(hws)]
        for model in models:
            row = []
            for h in hws:
                here = [x for x in members if x.recipe.model.name == model and x.recipe.hardware.platform == h]
                row.append("<br>".join(f"[{x.slug}](recipes/{x.slug}.md) {badge(status[x.slug])}" for x in here))
            lines.append(f"| {cell(model)} | " + " | ".join(row) + " |")
        lines.append("")
    if bench:
        lines += ["## Benchmark-only recipes", ""]
        lines += [
            "Speed benchmarks of an architecture on vLLM's random weights: no answer means anything, so they "
            "are never verified and serve no model.",
            "",
            "| recipe | what it serves | hardware | status | why |",
            "|---|---|---|---|---|",
        ]
        for x in bench:
            r = x.recipe
            lines.append(
                f"| [{x.slug}](recipes/{x.slug}.md) {badge(status[x.slug])} | {cell(r.model.name)} | "
                f"{hw_cell(r.hardware.platform, hardware_label(r))} | {status[x.slug]} | {cell(benchmark_reason(r))} |"
            )
        lines.append("")
    lines += ["## Every recipe", "", "| recipe | model | hardware | status |", "|---|---|---|---|"]
    for x in recipes:
        r = x.recipe
        lines.append(
            f"| [{x.slug}](recipes/{x.slug}.md) | {cell(r.model.name)} | "
            f"{hw_cell(r.hardware.platform, hardware_label(r))} | {status[x.slug]} |"
        )
    if compared:
        lines += ["", "## Variants compared", ""]
        lines += [f"- [{b}](compare/{b}.md): " + ", ".join(x.slug for x in members) for b, members in compared.items()]
    lines += ["", "See also [errors](errors.md) and [the rule language](rules.md).", ""]
    return "\n".join(lines)
