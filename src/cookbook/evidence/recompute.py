"""Every declared gate judged again from the bundle's raw evidence.

Each gate module's own recompute() (found through cookbook.gates.registry) computes its measured
figures again from the transcripts and saved /metrics snapshots; a figure that disagrees with
results.json, or that results.json leaves out, is a refusal. Then the gate's own verdict() judges
the figures against the recipe's CURRENT thresholds (not the bundle's copy of them).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from cookbook.gates.recorded import RecordedRun
from cookbook.gates.registry import gate_module

# How closely a recomputed figure must match results.json: transcripts keep chunk times to
# 0.1 ms, so times and rates derived from them differ from the live figures in the last digit.
TOLERANCE = {
    "max_decode_gap_s": (1e-3, 0.0),
    # A level's duration is recomputed from the records' end times (1 ms) and elapsed (0.1 ms).
    "sweep": (0.5, 0.02),
    "output_throughput": (0.5, 0.02),
    "chat": (0.5, 0.02),  # the speed gate's chat workload: levels as the sweep's
    "ttft_s": (1e-3, 0.0),
}


def agree(claimed: Any, got: Any, abs_tol: float, rel_tol: float) -> bool:
    """A claimed figure (any JSON value) matches the recomputed one, numbers within the tolerance."""
    if isinstance(got, dict):
        return (
            isinstance(claimed, dict)
            and set(claimed) >= set(got)
            and all(agree(claimed[k], v, abs_tol, rel_tol) for k, v in got.items())
        )
    if isinstance(got, list):
        return (
            isinstance(claimed, list)
            and len(claimed) == len(got)
            and all(agree(a, b, abs_tol, rel_tol) for a, b in zip(claimed, got))
        )
    if isinstance(got, bool) or got is None or isinstance(got, str):
        return claimed == got and type(claimed) is type(got)
    if isinstance(got, (int, float)):
        if isinstance(claimed, bool) or not isinstance(claimed, (int, float)):
            return False
        if math.isinf(got) or math.isinf(claimed):
            return claimed == got
        return math.isclose(claimed, got, abs_tol=max(abs_tol, 1e-9), rel_tol=rel_tol)
    return claimed == got


def _disagreements(name: str, claimed: dict, got: dict) -> list[str]:
    out = []
    for key, value in got.items():
        if key not in claimed:
            out.append(
                f"gate {name}: results.json does not record {key}, which the raw evidence gives as {json.dumps(value)}"
            )
        elif not agree(claimed[key], value, *TOLERANCE.get(key, (0.0, 0.0))):
            out.append(
                f"gate {name}: results.json says {key} = {json.dumps(claimed[key])}, "
                f"the bundle's raw evidence gives {json.dumps(value)}"
            )
    return out


def check_gates(root: Path, doc: dict, resolved) -> list[str]:
    """Every declared gate: figures recomputed from the raw evidence agree with results.json, and
    the gate's verdict() on them passes against the recipe's current thresholds."""
    out = []
    spec = resolved.recipe.gates
    recorded = RecordedRun(root, doc)
    for name in spec.declared():
        g = (doc.get("gates") or {}).get(name)
        if not isinstance(g, dict) or g.get("status") != "passed":
            continue  # cookbook.evidence.claims names it
        cfg = getattr(spec, name)
        module = gate_module(name)
        claimed = g.get("measured") if isinstance(g.get("measured"), dict) else {}
        try:
            got, items = module.recompute(recorded, cfg)
        except Exception as e:  # a forged or damaged transcript: say what could not be read
            out.append(f"gate {name}: cannot recompute its figures from the bundle: {type(e).__name__}: {e}")
            continue
        out += _disagreements(name, claimed, got)
        claimed_items = g.get("items") if isinstance(g.get("items"), list) else []
        # The evidence's figures (recomputed ones where the bundle holds the raw data), and, when
        # results.json claims other figures, those too: a 'passed' whose own numbers fail is refused.
        judged = [
            ("judged again from the raw evidence", {**claimed, **got}, items if items is not None else claimed_items)
        ]
        if {**claimed, **got} != {**got, **claimed}:
            judged.append(("its own recorded figures", {**got, **claimed}, claimed_items))
        for what, measured, its_items in judged:
            try:
                failures = [msg for ok, msg in module.verdict(measured, its_items, cfg) if not ok]
            except (TypeError, KeyError, ValueError, AttributeError) as e:
                failures = [f"its measured values cannot be judged ({type(e).__name__}: {e})"]
            if failures:
                out.append(
                    f"gate {name} says passed, but {what} fail the recipe's thresholds: " + "; ".join(failures)[:600]
                )
    return out
