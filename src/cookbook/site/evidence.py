"""A recipe page's evidence sections: Gates (the bundle's results, or the bars a recipe must
pass), Reported figures (from the source documents) and Performance (the speed gate's
figures, with its sweep plotted as inline SVG)."""

from __future__ import annotations

import json
import math
import re

from cookbook.recipe import paths
from cookbook.site.markdown import badge, cell, value_text

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
    if r.reported:
        lines += ["## Reported figures", ""]
        lines += ["Numbers from the source documents, **reported**, never verified here.", ""]
        for rep in r.reported:
            lines += [
                f"**{cell(rep.source)}** (reported): {cell(rep.what)}"
                + (f" Hardware: {cell(rep.hardware)}." if rep.hardware else ""),
                "",
            ]
            if rep.columns and rep.rows:
                lines += ["| " + " | ".join(cell(c) for c in rep.columns) + " |", "|" + "---|" * len(rep.columns)]
                lines += [
                    "| " + " | ".join("not reported" if x is None else cell(value_text(x)) for x in row) + " |"
                    for row in rep.rows
                ]
                lines.append("")
            if rep.values:
                lines += ["| figure | value |", "|---|---|"]
                lines += [f"| {cell(k)} | {cell(value_text(x))} |" for k, x in rep.values.items()] + [""]
            lines += [f"- {cell(n)}" for n in rep.notes] + ([""] if rep.notes else [])
    return lines


def sweep_svg(points: list[tuple[int, float]], width: int = 480, height: int = 240) -> str:
    """A line plot of output tok/s against concurrency (log2 x axis) as inline SVG text, so
    the page stays a generated text file that `cookbook docs --check` can compare."""
    pad_l, pad_r, pad_t, pad_b = 56, 32, 16, 40
    xs = [math.log2(c) for c, _ in points]
    top = max(v for _, v in points) * 1.1 or 1.0
    x_span = (max(xs) - min(xs)) or 1.0

    def xy(c: int, v: float) -> tuple[float, float]:
        x = pad_l + (math.log2(c) - min(xs)) / x_span * (width - pad_l - pad_r)
        return round(x, 1), round(height - pad_b - v / top * (height - pad_t - pad_b), 1)

    coords = [xy(c, v) for c, v in points]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        'aria-label="output tokens per second by concurrency">',
        f'<line x1="{pad_l}" y1="{height - pad_b}" x2="{width - pad_r}" y2="{height - pad_b}" stroke="#888"/>',
        f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{height - pad_b}" stroke="#888"/>',
        '<polyline fill="none" stroke="#3f51b5" stroke-width="2" points="'
        + " ".join(f"{x},{y}" for x, y in coords)
        + '"/>',
    ]
    for (c, v), (x, y) in zip(points, coords):
        out.append(f'<circle cx="{x}" cy="{y}" r="3" fill="#3f51b5"/>')
        out.append(f'<text x="{x}" y="{height - pad_b + 16}" font-size="12" text-anchor="middle">{c}</text>')
        out.append(f'<text x="{x}" y="{y - 8}" font-size="11" text-anchor="middle">{v:g}</text>')
    out.append(
        f'<text x="{(width + pad_l) / 2}" y="{height - 6}" font-size="12" text-anchor="middle">'
        "concurrent streams</text>"
    )
    out.append(
        f'<text x="14" y="{height / 2}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {height / 2})">output tok/s</text>'
    )
    out.append("</svg>")
    return "".join(out)


def performance_lines(r) -> list[str]:
    """The speed gate's figures from the bundle that verified the recipe, with the sweep plotted."""
    v = r.verified
    g = (v.gates or {}).get("speed") if v is not None else None
    measured = (g if isinstance(g, dict) else {}).get("measured") or {}
    bundle = paths.repo_root() / v.bundle if v is not None and v.bundle else None
    full = {}
    if bundle is not None and (bundle / "results.json").is_file():
        full = (json.loads((bundle / "results.json").read_text(encoding="utf-8")).get("gates") or {}).get("speed") or {}
        full = full.get("measured") or {}
    sweep = [row for row in full.get("sweep") or [] if isinstance(row, dict)]
    if not measured and not sweep:
        return []
    lines = [
        "## Performance",
        "",
        f"Measured by the speed gate in the bundle of {v.date} (`{v.bundle}`), in `vllm bench serve`'s "
        "terms: at each concurrency, streamed greedy completions of varied natural prompts (passages of "
        "the built-in prose, each with a unique suffix), every one the same length (ignore_eos).",
        "",
    ]
    rows = [(f"output_throughput at {c} streams", t) for c, t in (full.get("output_throughput") or {}).items()]
    rows += [(f"ttft_s at {n} tokens (uncached)", t) for n, t in (full.get("ttft_s") or {}).items()]
    if rows:
        lines += ["| figure | value |", "|---|---|"] + [f"| {k} | {cell(str(val))} |" for k, val in rows] + [""]
    points = [
        (int(row["concurrency"]), float(row["output_throughput"]))
        for row in sweep
        if isinstance(row.get("concurrency"), int) and isinstance(row.get("output_throughput"), (int, float))
    ]
    if len(points) >= 2:
        cols = ("concurrency", "requests", "output_throughput", "median_ttft_ms", "median_tpot_ms", "p99_itl_ms")
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(cell(str(row.get(k))) for k in cols) + " |" for row in sweep]
        lines += ["", sweep_svg(points), ""]
    return lines
