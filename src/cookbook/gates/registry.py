"""Each gate's module, found by the gate's name.

GatesSpec's gate fields (cookbook.recipe.gates_spec) name the gates and their run order; the
module cookbook.gates.<name> holds all the code of one gate:

    run(ctx, cfg)                  async: measure against the live server into ctx.result
    verdict(measured, items, cfg)  the checks, as a pure function of what was measured
    recompute(run, cfg)            (measured, items or None) again from a finished bundle
                                   (a cookbook.gates.recorded.RecordedRun)

The runner (cookbook.gates.runner) and the evidence re-check (cookbook.evidence) both find a
gate's module here, and tests/gates/test_registry.py checks every gate has all three.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from cookbook.recipe.gates_spec import GATE_NAMES


def gate_module(name: str) -> ModuleType:
    """cookbook.gates.<name>, imported on first use (speed pulls in numpy)."""
    if name not in GATE_NAMES:
        raise KeyError(f"no gate named {name!r}; the gates are {', '.join(GATE_NAMES)}")
    return importlib.import_module(f"{__package__}.{name}")
