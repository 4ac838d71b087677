"""A recipe page's evidence sections: Gates (the bundle's results, or the bars a recipe must
pass) and Performance (measured here by the speed gate, then reported by the source documents,
each throughput-by-concurrency table also as a plot: cookbook.site.plots)."""

from __future__ import annotations

import re

from cookbook.site.markdown import badge, cell, value_text
from cookbook.site.plots import bundle_speed, image_line, measured_sweep, plots_of

LONG_TABLE = 6  # rows; a longer reported table that is plotted is collapsed under its plot
BAR = re.compile(r"^(min|max)_")


NOT_BARS = {
    "max_tokens",
    "max_concurrent_requests",
    "decode_max_tokens",
    "sweep_max_tokens",
    "sweep_requests",
    "passage_sentences",
}


def bars(r, name: str) -> str:
    """A declared gate's pass bars (its min_*/max_* thresholds), or what passing means for a gate without one."""
    data = getattr(r.gates, name).model_dump()
    found = [f"{k} {value_text(v)}" for k, v in data.items() if BAR.match(k) and k not in NOT_BARS and v is not None]
    return "; ".join(found) or (type(r.gates).model_fields[name].description or "")


def declared_gates(r) -> list[tuple[str, object]]:
    return [
        (name, g)
        for name in type(r.gates).model_fields
        if (g := getattr(r.gates, name, None)) is not None and hasattr(g, "model_dump")
    ]


def measured_text(measured) -> str:
    if not isinstance(measured, dict):
        return cell(value_text(measured))
    return "; ".join(f"{k} {cell(value_text(v))}" for k, v in measured.items())


def gate_lines(resolved, status: str) -> list[str]:
    r = resolved.recipe
    lines: list[str] = []
    v = r.verified
    if v is not None:
        lines += ["## Gates", ""]
        where = f", bundle `{v.bundle}`" if v.bundle else ""
        lines += [f"Gate results of {v.date}{where}; status now {badge(status)}.", ""]
        if v.environment:
            lines += [f"Environment: `{v.environment}`.", ""]
        if v.gates:
            declared = dict(declared_gates(r))
            lines += ["| gate | result | measured | bar |", "|---|---|---|---|"]
            for name, g in v.gates.items():
                g = g if isinstance(g, dict) else {"status": g}
                bar = bars(r, name) if name in declared else ""
                lines.append(
                    f"| {name} | {cell(str(g.get('status', '')))} | {measured_text(g.get('measured', ''))} | {cell(bar)} |"
                )
            lines.append("")
    elif gate_specs := declared_gates(r):
        lines += ["## Gates", ""]
        lines += [
            f"No evidence bundle has verified this recipe (status {badge(status)}). "
            "The gates it must pass, and their bars (`gates/run.sh` runs them):",
            "",
            "| gate | bar | calibrated on |",
            "|---|---|---|",
        ]
        for name, g in gate_specs:
            lines.append(f"| {name} | {cell(bars(r, name))} | {cell(getattr(g, 'calibrated_on', None) or '')} |")
        lines.append("")
    return lines


def performance_lines(resolved) -> list[str]:
    """The speed gate's figures from the bundle that verified the recipe, with the sweep plotted."""
    r = resolved.recipe
    v = r.verified
    g = (v.gates or {}).get("speed") if v is not None else None
    measured = (g if isinstance(g, dict) else {}).get("measured") or {}
    sweep = measured_sweep(r)
    full = bundle_speed(r)
    lines = ["## Performance", ""]
    if not measured and not sweep:
        return lines + reported_lines(resolved) if r.reported else []
    lines += [
        f"**Measured here** by the speed gate in the bundle of {v.date} (`{v.bundle}`), in `vllm bench serve`'s "
        "terms: at each concurrency, streamed greedy completions of varied natural prompts (passages of "
        "the built-in prose, each with a unique suffix), every one the same length (ignore_eos).",
        "",
    ]
    rows = [(f"output_throughput at {c} streams", t) for c, t in (full.get("output_throughput") or {}).items()]
    rows += [(f"ttft_s at {n} tokens (uncached)", t) for n, t in (full.get("ttft_s") or {}).items()]
    if rows:
        lines += ["| figure | value |", "|---|---|"] + [f"| {k} | {cell(str(val))} |" for k, val in rows] + [""]
    if sweep:
        cols = ("concurrency", "requests", "output_throughput", "median_ttft_ms", "median_tpot_ms", "p99_itl_ms")
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(cell(str(row.get(k))) for k in cols) + " |" for row in sweep]
        lines.append("")
    if (plot := plots_of(resolved).get("measured")) is not None:
        lines += [image_line(resolved.slug, plot), ""]
    return lines + reported_lines(resolved)


def reported_lines(resolved) -> list[str]:
    """The source documents' figures, each table with its plot where it is throughput by concurrency."""
    r = resolved.recipe
    lines: list[str] = []
    plots = plots_of(resolved)
    if r.reported:
        lines += ["### Reported by the source documents", ""]
        lines += ["Numbers from the source documents: **reported**, never measured or verified here.", ""]
        for i, rep in enumerate(r.reported):
            lines += [
                f"**Reported** in “{cell(rep.source)}”: {cell(rep.what)}"
                + (f" Hardware: {cell(rep.hardware)}." if rep.hardware else ""),
                "",
            ]
            table = []
            if rep.columns and rep.rows:
                table += ["| " + " | ".join(cell(c) for c in rep.columns) + " |", "|" + "---|" * len(rep.columns)]
                table += [
                    "| " + " | ".join("not reported" if x is None else cell(value_text(x)) for x in row) + " |"
                    for row in rep.rows
                ]
            plot = plots.get(f"reported-{i}")
            if plot is not None:
                lines += [image_line(resolved.slug, plot), ""]
            if plot is not None and len(rep.rows) > LONG_TABLE:  # the plot says it; the figures on demand
                lines += [f'??? note "The {len(rep.rows)} rows as reported"', "", *("    " + t for t in table), ""]
            elif table:
                lines += [*table, ""]
            if rep.values:
                lines += ["| figure | value |", "|---|---|"]
                lines += [f"| {cell(k)} | {cell(value_text(x))} |" for k, x in rep.values.items()] + [""]
            lines += [f"- {cell(n)}" for n in rep.notes] + ([""] if rep.notes else [])
    return lines
