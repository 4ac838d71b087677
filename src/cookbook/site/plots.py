"""Throughput-by-concurrency plots for the recipe pages, drawn with matplotlib.

`plots_of(resolved)` says which plots a page has (the page links them, one place decides); the
mkdocs hook (hooks.py beside this file) draws them into the built site at build time, so no image
is generated into docs/ or committed. Reported and measured are told apart in the title, the
legend and the line style: measured solid with filled points, reported dashed with open points.
"""

from __future__ import annotations

import io
import json
import re
import textwrap
from dataclasses import dataclass

from cookbook.recipe import paths
from cookbook.site.markdown import hardware_label

WIDE = re.compile(r"^c?(\d+)$")  # columns c1, c4, ... (or 1, 4, ...): one column per concurrency
CONCURRENCY = re.compile(r"concurren", re.I)
THROUGHPUT = re.compile(r"tok_s|throughput|tok/s", re.I)


@dataclass
class Plot:
    key: str  # the file is plots/<slug>-<key>.svg
    title: str
    measured: bool
    lines: list[tuple[str, list[tuple[int, float]]]]  # (label, [(concurrency, tok/s)])
    ylabel: str


def _num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def reported_lines(rep) -> tuple[list[tuple[str, list[tuple[int, float]]]], str]:
    """A reported table's series, when it is throughput by concurrency; else []."""
    cols = list(rep.columns)
    if len(cols) < 2 or not rep.rows:
        return [], ""
    wide = [(i, int(m.group(1))) for i, c in enumerate(cols) if (m := WIDE.match(str(c)))]
    if len(wide) >= 2:
        out = []
        for row in rep.rows:
            pts = [(c, float(row[i])) for i, c in wide if i < len(row) and _num(row[i]) is not None]
            if len(pts) >= 2:
                out.append((str(row[0]), pts))
        return out, "tok/s"
    ci = next((i for i, c in enumerate(cols) if CONCURRENCY.search(str(c))), None)
    yi = next((i for i, c in enumerate(cols) if THROUGHPUT.search(str(c)) and i != ci), None)
    if ci is None or yi is None:
        return [], ""
    series: dict[str, list[tuple[int, float]]] = {}
    for row in rep.rows:
        if max(ci, yi) >= len(row) or _num(row[ci]) is None or _num(row[yi]) is None:
            continue
        label = str(row[0]) if ci != 0 and yi != 0 else ""
        series.setdefault(label, []).append((int(row[ci]), float(row[yi])))
    return [(k, sorted(v)) for k, v in series.items() if len(v) >= 2], str(cols[yi])


def bundle_speed(r) -> dict:
    """The speed gate's measured figures in the bundle that verified the recipe ({} without one)."""
    v = r.verified
    if v is None or not v.bundle:
        return {}
    results = paths.repo_root() / v.bundle / "results.json"
    if not results.is_file():
        return {}
    speed = (json.loads(results.read_text(encoding="utf-8")).get("gates") or {}).get("speed") or {}
    return speed.get("measured") or {} if isinstance(speed, dict) else {}


def measured_sweep(r) -> list[dict]:
    """The speed gate's sweep rows from the bundle that verified the recipe ([] without one)."""
    return [row for row in bundle_speed(r).get("sweep") or [] if isinstance(row, dict)]


def plots_of(resolved) -> dict[str, Plot]:
    r = resolved.recipe
    out: dict[str, Plot] = {}
    pts = [
        (int(row["concurrency"]), float(row["output_throughput"]))
        for row in measured_sweep(r)
        if isinstance(row.get("concurrency"), int) and _num(row.get("output_throughput")) is not None
    ]
    if len(pts) >= 2:
        out["measured"] = Plot(
            "measured",
            f"Measured here ({r.verified.date}): output tok/s by concurrency",
            True,
            [(f"measured, {hardware_label(r)}", pts)],
            "output tok/s",
        )
    for i, rep in enumerate(r.reported):
        lines, ylabel = reported_lines(rep)
        if lines:
            out[f"reported-{i}"] = Plot(
                f"reported-{i}", f"Reported, not measured here: {rep.source}", False, lines, ylabel
            )
    return out


def image_line(slug: str, plot: Plot) -> str:
    """The Markdown that shows a plot on the recipe page (docs/recipes/<slug>.md)."""
    kind = "measured" if plot.measured else "reported"
    return f"![{kind}: {plot.title}](../plots/{slug}-{plot.key}.svg)"


def svg(plot: Plot) -> bytes:
    """The plot as SVG bytes, the same for the same data (no date, a fixed id salt)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    with matplotlib.rc_context({"svg.hashsalt": "cookbook", "svg.fonttype": "none"}):
        fig, ax = plt.subplots(figsize=(6.4, 3.4), dpi=100)
        try:
            for label, pts in plot.lines:
                xs, ys = zip(*pts)
                style = (
                    {"linestyle": "-", "marker": "o"}
                    if plot.measured
                    else {"linestyle": "--", "marker": "o", "markerfacecolor": "none"}
                )
                ax.plot(xs, ys, label=(label or "reported") if not plot.measured else label, **style)
            ax.set_xscale("log", base=2)
            ticks = sorted({x for _, pts in plot.lines for x, _ in pts})
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.set_xlabel("concurrent requests")
            ax.set_ylabel(plot.ylabel)
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.set_title(textwrap.fill(plot.title, 80), fontsize=9, loc="left")
            ax.legend(fontsize=8, title="measured" if plot.measured else "reported", title_fontsize=8)
            fig.tight_layout()
            buf = io.BytesIO()
            fig.savefig(buf, format="svg", metadata={"Date": None})
        finally:
            plt.close(fig)
    return buf.getvalue()
