"""docs/compare/<base>.md: the variants of one base side by side, only the settings that
differ, then why."""

from __future__ import annotations

from pathlib import Path

from cookbook.recipe.resolve import resolve
from cookbook.site.markdown import MARKER, cell, code, engine_pin, front_matter, hardware_label, value_text


def family_root(resolved) -> str | None:
    """The base a recipe extends (the root of its chain), or None for a recipe that extends nothing."""
    if len(resolved.chain) < 2:
        return None
    return Path(resolved.chain[0].path).parent.name


def facts(resolved) -> dict[str, tuple[str, str | None]]:
    """What a comparison lines up: each setting's value and its reason."""
    r = resolved.recipe
    out: dict[str, tuple[str, str | None]] = {
        "hardware": (hardware_label(r), None),
        "engine": (engine_pin(r), r.image.engine.why),
    }
    if resolved.quant:
        out["default quant"] = (resolved.quant, r.quants[resolved.quant].use_when)
    if r.image.fixes.profile:
        opt = [f.name for f in r.image.fixes.opt_in]
        out["fix profile"] = (r.image.fixes.profile + (f" + {', '.join(opt)}" if opt else ""), None)
    out["serve model"] = (r.serve.model, None)
    for key, s in r.env.items():
        out[f"env {key}"] = (value_text(s.value), s.why)
    for key, s in r.serve.args.items():
        out[f"--{key.replace('_', '-')}"] = (value_text(s.value), s.why)
    return out


def compare_page(base: str, members: list) -> str:
    """The variants of one base side by side: only the settings that differ, then why."""
    slugs = [m.slug for m in members]
    all_facts = {m.slug: facts(m) for m in members}
    keys: list[str] = []
    for f in all_facts.values():
        keys += [k for k in f if k not in keys]
    differ = [k for k in keys if len({all_facts[s].get(k, (None,))[0] for s in slugs}) > 1]
    same = [k for k in keys if k not in differ]
    lines = [*front_matter(f"{base} variants"), MARKER, f"# {base}: its variants compared", ""]
    lines += [
        f"{len(slugs)} recipes build on `recipes/{base}/recipe.yaml`: "
        + ", ".join(f"[{s}](../recipes/{s}.md)" for s in slugs)
        + f". {len(differ)} settings differ between them; {len(same)} are the same in all.",
        "",
    ]
    lines += ["| setting | " + " | ".join(f"[{s}](../recipes/{s}.md)" for s in slugs) + " |"]
    lines += ["|---|" + "---|" * len(slugs)]
    for k in differ:
        row = [
            code(all_facts[s][k][0]) if all_facts[s].get(k, (None,))[0] not in (None, "not set") else "not set"
            for s in slugs
        ]
        lines.append(f"| `{k}` | " + " | ".join(row) + " |")
    lines += ["", "## Why they differ", ""]
    for k in differ:
        whys = [(s, all_facts[s][k][1]) for s in slugs if k in all_facts[s] and all_facts[s][k][1]]
        if not whys:
            continue
        lines += [f"### `{k}`", ""]
        if len({w for _, w in whys}) == 1 and len(whys) > 1:
            lines += [f"- {', '.join(s for s, _ in whys)}: {cell(whys[0][1])}"]
        else:
            lines += [f"- **{s}** ({code(all_facts[s][k][0])}): {cell(w)}" for s, w in whys]
        lines.append("")
    return "\n".join(lines)


def groups(slugs: list[str]) -> tuple[list, dict[str, list]]:
    """Every launchable recipe resolved, and those of each base with two or more variants."""
    recipes = [x for x in (resolve(s, check=False) for s in slugs) if not x.recipe.abstract]
    by_base: dict[str, list] = {}
    for x in recipes:
        if (base := family_root(x)) is not None:
            by_base.setdefault(base, []).append(x)
    for x in recipes:  # a base that is itself a recipe leads its variants
        if x.slug in by_base:
            by_base[x.slug].insert(0, x)
    return recipes, {b: m for b, m in by_base.items() if len(m) > 1}
