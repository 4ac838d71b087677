"""The gate registry is GatesSpec's gate fields: names, run order and module lookup follow
from them (cookbook.gates.registry), and `gates.calibrated_on` fills every gate that does not set its own."""

import inspect
from pathlib import Path

import pytest
from pydantic import ValidationError

from cookbook.gates.registry import gate_module
from cookbook.recipe import resolve
from cookbook.recipe.gates_spec import GATE_NAMES, GatesSpec
from cookbook.recipe.gates_spec.base import GateBase


def test_gate_names_are_gatesspecs_gate_fields_in_order():
    fields = [n for n, f in GatesSpec.model_fields.items() if n not in ("calibrated_on", "benchmark_only")]
    assert list(GATE_NAMES) == fields
    assert GATE_NAMES[0] == "greedy" and GATE_NAMES[-1] == "speed"  # cheap first, speed last


@pytest.mark.parametrize("name", GATE_NAMES)
def test_every_gate_has_a_model_and_a_module(name):
    model = [a for a in GatesSpec.model_fields[name].annotation.__args__ if isinstance(a, type)][0]
    assert issubclass(model, GateBase)
    module = gate_module(name)  # what the runner and the evidence re-check use
    assert module.__name__ == f"cookbook.gates.{name}"
    assert inspect.iscoroutinefunction(module.run)
    for part in ("verdict", "recompute"):  # judged, and recomputed from a bundle, by the module itself
        assert callable(getattr(module, part, None)) and not inspect.iscoroutinefunction(getattr(module, part))
    assert list(inspect.signature(module.recompute).parameters) == ["recorded", "cfg"]


def test_an_unknown_gate_name_is_refused():
    with pytest.raises(KeyError, match="no gate named 'client'"):
        gate_module("client")  # a module of the suite, but not a gate


def test_calibrated_on_default_fills_gates_without_their_own():
    g = GatesSpec.model_validate({"calibrated_on": "run A", "greedy": {}, "speed": {"calibrated_on": "run B"}})
    assert (g.greedy.calibrated_on, g.speed.calibrated_on) == ("run A", "run B")
    assert "calibrated_on" not in g.model_dump()  # resolved into the gates, not kept beside them
    with pytest.raises(ValidationError, match="greedy.calibrated_on"):
        GatesSpec.model_validate({"greedy": {}})  # neither its own nor a default


def test_default_resolves_to_what_each_gate_setting_its_own_gives(recipes_dir):
    r = resolve("gates-cpu")
    assert "calibrated_on" not in r.data["gates"]
    assert {spec["calibrated_on"] for spec in r.data["gates"].values()} == {"uncalibrated (test fixture)"}
    path = recipes_dir / "gates-cpu" / "recipe.yaml"
    text = path.read_text()
    spelled = text.replace('  calibrated_on: "uncalibrated (test fixture)"   # every gate below\n', "")
    for name in GATE_NAMES:
        spelled = spelled.replace(f"  {name}: {{", f'  {name}: {{calibrated_on: "uncalibrated (test fixture)", ')
    declared = resolve("gates-cpu").recipe.gates.declared()
    assert spelled.count('calibrated_on: "uncalibrated (test fixture)"') == len(declared) >= 10
    path.write_text(spelled)
    assert resolve("gates-cpu").content_hash == r.content_hash  # same recipe, same hash


def test_a_new_gates_spec_module_is_all_the_registry_needs(tmp_path, monkeypatch):
    """Adding a gate is its spec module (recipe/gates_spec/<name>.py) and its gate module: the registry
    lists the package, so a module dropped beside the others joins in its RUN_ORDER, and the registry
    names no gate itself."""
    import sys

    from cookbook.recipe import gates_spec

    text = Path(gates_spec.__file__).read_text(encoding="utf-8")
    assert not [n for n in GATE_NAMES if f'"{n}"' in text or f"'{n}'" in text]
    (tmp_path / "probe.py").write_text(
        "from cookbook.recipe.gates_spec.base import GateBase\n"
        "RUN_ORDER = 15\nDESCRIPTION = 'a probe'\n"
        "class ProbeGate(GateBase):\n    pass\n"
        "SPEC = ProbeGate\n"
    )
    monkeypatch.setattr(gates_spec, "__path__", [*gates_spec.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "cookbook.recipe.gates_spec.probe", raising=False)
    names = [m.__name__.rsplit(".", 1)[1] for m in gates_spec._gate_modules()]
    assert names[:3] == ["greedy", "probe", "logprobs"]
    (tmp_path / "probe.py").write_text("RUN_ORDER = 10\nSPEC = int\n")
    monkeypatch.delitem(sys.modules, "cookbook.recipe.gates_spec.probe", raising=False)
    with pytest.raises(TypeError, match="probe: a gate's spec module defines SPEC, a GateBase model"):
        gates_spec._gate_modules()
    (tmp_path / "probe.py").write_text(
        "from cookbook.recipe.gates_spec.base import GateBase\nRUN_ORDER = 10\nDESCRIPTION = ''\nSPEC = GateBase\n"
    )
    monkeypatch.delitem(sys.modules, "cookbook.recipe.gates_spec.probe", raising=False)
    with pytest.raises(ValueError, match="two gates share a RUN_ORDER"):
        gates_spec._gate_modules()
    sys.modules.pop("cookbook.recipe.gates_spec.probe", None)
