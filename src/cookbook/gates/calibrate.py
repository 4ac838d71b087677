"""Bars from a calibration run: each gate threshold set from what a bundle measured, by a stated rule.

A recipe's thresholds are regression bars for its engine pin, fixes and hardware. On new hardware
the way to set them is to run the gates once, then derive each bar from the figure it judges with
room for a busier machine. The rules (one per threshold field, below) are the project's margins:

    throughput floors (tok/s)     half the measured figure
    latency ceilings (s)          twice the measured figure, and at least 0.25 s above it
                                  (GPU latencies are milliseconds; scheduling jitter is not)
    decode-gap ceiling (s)        three times the measured gap, and at least 0.5 s above it
    needle retrieval fraction     the measured codes less a fifth of those hidden (at least one miss)
    GSM8K accuracy                the measured fraction less two binomial standard errors
    spec acceptance rate          two thirds of the measured rate
    spec mean acceptance length   1 + two thirds of the measured length above 1

A field without a rule keeps its value (tools' min_passed_fraction: structured output has no
partial credit). The recipe is then verified by a second, separate gate run against these bars:
calibration never marks anything verified.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Rule:
    figure: Callable[[dict, dict], float | None]  # (measured, gate spec) -> the figure the bar judges
    bar: Callable[[float, dict], float]
    says: str  # the rule in words, for calibrated_on


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _get(*path: str) -> Callable[[dict, dict], float | None]:
    def get(measured: dict, _spec: dict) -> float | None:
        v: Any = measured
        for p in path:
            if not isinstance(v, dict) or p not in v:
                return None
            v = v[p]
        return _number(v)

    return get


def _sig3(x: float) -> float:
    """Three significant figures, rounded toward the safe side by the caller's choice of rule."""
    if x == 0:
        return 0.0
    return float(f"{x:.3g}")


def _floor(x: float, digits: int = 2) -> float:
    return math.floor(x * 10**digits) / 10**digits


def _ceil(x: float, digits: int = 2) -> float:
    return math.ceil(x * 10**digits) / 10**digits


def _default_levels() -> list[int]:
    from cookbook.recipe.gates_spec.speed import SpeedGate

    return SpeedGate.model_fields["sweep_concurrencies"].default_factory()


def _throughput_floor(m: float, _: dict) -> float:
    return _sig3(m * 0.5)


def _latency_ceiling(m: float, _: dict) -> float:
    return _ceil(max(2 * m, m + 0.25))


def _needles(m: float, measured: dict) -> float:
    hidden = measured.get("codes_hidden") or 0
    found = measured.get("codes_found") or 0
    if not hidden:
        return _floor(m * 0.8)
    allowed = max(1, round(hidden / 5))
    return max(0.0, _floor((found - allowed) / hidden))


def _gsm8k(m: float, measured: dict) -> float:
    n = measured.get("n") or 0
    se = math.sqrt(m * (1 - m) / n) if n else 0.0
    return max(0.0, _floor(m - 2 * se))


RULES: dict[tuple[str, str], Rule] = {
    ("speed", "min_output_throughput_1_stream"): Rule(_get("output_throughput", "1"), _throughput_floor, "half of it"),
    ("speed", "min_output_throughput_peak"): Rule(
        lambda m, spec: _get("output_throughput", str(max(spec.get("sweep_concurrencies") or _default_levels())))(
            m, spec
        ),
        _throughput_floor,
        "half of it",
    ),
    ("speed", "max_ttft_2k_s"): Rule(_get("ttft_s", "2048"), _latency_ceiling, "twice it, >= +0.25 s"),
    ("speed", "max_ttft_8k_s"): Rule(_get("ttft_s", "8192"), _latency_ceiling, "twice it, >= +0.25 s"),
    ("stress", "max_decode_gap_s"): Rule(
        _get("max_decode_gap_s"), lambda m, _: _ceil(max(3 * m, m + 0.5)), "three times it, >= +0.5 s"
    ),
    ("needles", "min_found_fraction"): Rule(_get("found_fraction"), _needles, "a fifth of the codes may be missed"),
    ("gsm8k", "min_correct_fraction"): Rule(
        lambda m, spec: _number(m.get(f"accuracy_{spec.get('extraction', 'strict')}")),
        _gsm8k,
        "less two standard errors",
    ),
    ("spec_acceptance", "min_acceptance_rate"): Rule(
        _get("acceptance_rate"), lambda m, _: _floor(m * 2 / 3), "two thirds of it"
    ),
    ("spec_acceptance", "min_mean_acceptance_length"): Rule(
        _get("mean_acceptance_length"), lambda m, _: _floor(1 + (m - 1) * 2 / 3), "1 + two thirds of it above 1"
    ),
}


@dataclass
class Calibrated:
    gate: str
    field: str
    old: float | None
    new: float
    figure: float
    says: str


def calibrate(gates_data: dict, results: dict) -> tuple[list[Calibrated], list[str]]:
    """New bars for `gates_data` (a recipe's own `gates:` mapping) from `results` (a bundle's
    results.json). Returns the changes and the problems (a gate that did not run, a figure missing)."""
    changes, problems = [], []
    measured_by_gate = {name: g.get("measured") or {} for name, g in (results.get("gates") or {}).items()}
    for gate, spec in gates_data.items():
        if not isinstance(spec, dict):
            continue
        for (g, field), rule in RULES.items():
            if g != gate or field not in spec and not _has_default_bar(gate, field):
                continue
            if gate not in measured_by_gate:
                problems.append(f"{gate}: not in the bundle, so {field} cannot be calibrated")
                continue
            figure = rule.figure(measured_by_gate[gate], spec)
            if figure is None:
                problems.append(f"{gate}.{field}: the bundle has no figure for it")
                continue
            changes.append(
                Calibrated(gate, field, spec.get(field), rule.bar(figure, measured_by_gate[gate]), figure, rule.says)
            )
    return changes, problems


def _has_default_bar(gate: str, field: str) -> bool:
    """Fields with a default bar are calibrated even when the recipe does not write them."""
    from cookbook.recipe.gates_spec import GatesSpec

    model = GatesSpec.model_fields.get(gate)
    ann = model.annotation if model else None
    inner = next((a for a in getattr(ann, "__args__", (ann,)) if hasattr(a, "model_fields")), None)
    f = inner.model_fields.get(field) if inner is not None else None
    return f is not None and f.default is not None


def environment_line(bundle_lock: str) -> str:
    """The GPU (or, without one, the host) a bundle ran on, from its environment lock's header."""
    for line in bundle_lock.splitlines():
        if line.startswith("# gpu: "):
            return line.removeprefix("# gpu: ").strip()
    return "no GPU (the environment lock names none)"


def calibrated_gates(gates_data: dict, results: dict, *, date: str, where: str, bundle: str) -> tuple[dict, list]:
    """`gates_data` with each calibrated bar replaced and every gate that ran given a calibrated_on
    that names the run and, per bar, the figure and the rule. Raises ValueError on problems."""
    changes, problems = calibrate(gates_data, results)
    ran = results.get("gates") or {}
    with_bar = {c.gate for c in changes}
    for name, g in ran.items():
        status = g.get("status")
        if name in gates_data and status != "passed" and not (status == "failed" and name in with_bar):
            # only a bar can be wrong in a calibration run; a failed check without one is a real failure
            problems.append(f"{name}: {status} in the bundle ({g.get('reason', 'no reason given')})")
    if problems:
        raise ValueError("; ".join(problems))
    out: dict = {}
    for gate, spec in gates_data.items():
        if gate == "calibrated_on" or not isinstance(spec, dict):
            continue
        spec = dict(spec)
        mine = [c for c in changes if c.gate == gate]
        for c in mine:
            spec[c.field] = c.new
        bars = "; ".join(f"{c.field} {c.new:g} from {c.figure:g} ({c.says})" for c in mine)
        status = ran.get(gate, {}).get("status", "not run")
        text = f"{date}, {where}, calibration run {bundle}: {status}" + (f"; {bars}" if bars else "; no bar to set")
        out[gate] = {"calibrated_on": text, **{k: v for k, v in spec.items() if k != "calibrated_on"}}
    return out, changes


def calibrate_recipe(resolved, bundle: Path, *, dry_run: bool = False, echo: Callable[[str], None] = print) -> None:
    """Write the bars of `bundle` (a calibration run of `resolved`) into the recipe's own file, one
    line per bar through `echo` (`cookbook maint gates calibrate`, `cookbook serve --calibrate`).
    Raises CookbookError, the recipe unchanged, when the bundle or the recipe cannot be calibrated."""
    import json

    import yaml

    from cookbook.errors import FAILED, CookbookError
    from cookbook.files import atomic_write
    from cookbook.recipe.calibrated import with_gates

    try:
        results = json.loads((bundle / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CookbookError(f"{bundle}: no readable results.json ({e})", help="give the bundle of a gate run") from None
    if results.get("recipe") != resolved.slug:
        raise CookbookError(f"{bundle}: a bundle of {results.get('recipe')!r}, not {resolved.slug}")
    own = yaml.safe_load(resolved.path.read_text(encoding="utf-8")).get("gates")
    if not isinstance(own, dict):
        raise CookbookError(f"{resolved.path}: no gates of its own to calibrate (they come from the recipe it extends)")
    lock = bundle / "environment.lock"
    engine = resolved.recipe.image.engine
    profile = resolved.recipe.image.fixes.profile
    where = environment_line(lock.read_text(encoding="utf-8") if lock.is_file() else "")
    where += f", {engine.package} {engine.version}" + (f" + fix profile {profile}" if profile else "")
    try:
        gates_new, changes = calibrated_gates(
            own, results, date=str(results.get("finished", ""))[:10], where=where, bundle=bundle.name
        )
        text = with_gates(resolved.path.read_text(encoding="utf-8"), gates_new)
    except ValueError as e:
        raise CookbookError(f"cannot calibrate {resolved.slug} from {bundle}: {e}", exit_code=FAILED) from None
    for c in changes:
        echo(f"{c.gate}.{c.field}: {c.old!r} -> {c.new:g}  (measured {c.figure:g}; {c.says})")
    if dry_run:
        echo("dry run: nothing written")
        return
    atomic_write(resolved.path, text)
    echo(f"wrote {len(changes)} bars into {resolved.path}; now verify with a second gate run")
