"""How a recipe declares its gates: which ones run and the thresholds each must meet.

A recipe's `gates:` block validates against `GatesSpec`. Every gate is optional; a recipe
with no gates is valid (and can never be verified by a gate it does not declare). Each
gate carries `calibrated_on`, naming the run that set its thresholds, so a threshold is
never a number without a source; `gates.calibrated_on` gives it to every gate that does
not set its own. Units are part of field names (_tokens, _s, _pct, _fraction, _tok_s).

This package is the registry: one module per gate (`<name>.py`: its `<Name>Gate(GateBase)`
model as SPEC, the GatesSpec field's DESCRIPTION, and RUN_ORDER), found here by listing the
package. GatesSpec gets a field per module, in RUN_ORDER: the order `cookbook gates run`
executes and prints them (cheap correctness gates first, load and speed last, so a broken
server fails fast); GATE_NAMES is that order. To add a gate:
  1. here, `<name>.py` with SPEC, DESCRIPTION and RUN_ORDER;
  2. src/cookbook/gates/<name>.py with `async def run(ctx, cfg)`, `verdict(measured, items, cfg)`
     and `recompute(recorded, cfg)` (the figures again from a bundle, for `gates verify`); the
     runner and the evidence re-check find it through cookbook.gates.registry, and
     tests/gates/test_registry.py checks every gate has all three;
  3. `make docs` (the schema and pages list the new keys).

Only pydantic (and the standard library) is imported here: the recipe model imports this
package on every command.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from cookbook.recipe.gates_spec.base import GateBase


def _gate_modules() -> list:
    """Every gate's spec module of this package, in RUN_ORDER."""
    found = [
        importlib.import_module(f"{__name__}.{m.name}")
        for m in pkgutil.iter_modules(__path__)
        if m.name != "base" and not m.name.startswith("_")
    ]
    for m in found:
        if not (isinstance(getattr(m, "SPEC", None), type) and issubclass(m.SPEC, GateBase)):
            raise TypeError(f"{m.__name__}: a gate's spec module defines SPEC, a GateBase model")
    orders = [m.RUN_ORDER for m in found]
    if len(set(orders)) != len(orders):
        raise ValueError(f"two gates share a RUN_ORDER: {sorted(orders)}")
    return sorted(found, key=lambda m: m.RUN_ORDER)


_GATES = _gate_modules()
# The gates, in run order (the modules' RUN_ORDER).
GATE_NAMES: tuple[str, ...] = tuple(m.__name__.rsplit(".", 1)[1] for m in _GATES)


class _Spec(BaseModel):
    # GatesSpec's fields before the gates'; its gate fields follow, one per spec module.
    model_config = ConfigDict(extra="forbid")

    calibrated_on: str | None = Field(
        None,
        min_length=1,
        exclude=True,
        description="calibrated_on of every gate here that does not set its own (resolved into "
        "each gate, so it is not kept beside them).",
    )

    benchmark_only: str | None = Field(
        None,
        min_length=1,
        description="Set on a recipe that is a benchmark only (e.g. vLLM's dummy weights, so no answer "
        "means anything): why. Its gates measure and are recorded, but it is shown as 'benchmark' and "
        "can never be verified. A recipe without it must declare at least one gate (lint R023).",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_calibrated_on(cls, data: Any) -> Any:
        default = data.get("calibrated_on") if isinstance(data, dict) else None
        if not isinstance(default, str) or not default:
            return data
        return {
            k: (
                {"calibrated_on": default, **v}
                if k in GATE_NAMES and isinstance(v, dict) and "calibrated_on" not in v
                else v
            )
            for k, v in data.items()
        }

    def declared(self) -> list[str]:
        """Names of declared gates, in run order."""
        return [name for name in GATE_NAMES if getattr(self, name) is not None]


GatesSpec = create_model(
    "GatesSpec",
    __base__=_Spec,
    __doc__="The gates a recipe must pass to be verified; absent gates are not run.",
    __module__=__name__,
    **{name: (m.SPEC | None, Field(None, description=m.DESCRIPTION)) for name, m in zip(GATE_NAMES, _GATES)},
)
