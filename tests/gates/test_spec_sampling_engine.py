"""spec_acceptance sends the sampling the recipe declares (issue 65: the Gaudi document measured its
MTP acceptance at the server's default, temperature 0.8, and the gate ran every request greedy). Against
the shared CPU server (Gemma 3 270M, n-gram speculation): every request in the transcript carries the
declared temperature, results.json records it, and the re-check of `gates verify` refuses the bundle
when the recipe declares other sampling than the requests were sent at."""

from __future__ import annotations

import asyncio
import json

import pytest

from cookbook.gates import spec_acceptance
from cookbook.gates.data import DataPaths
from cookbook.gates.recorded import RecordedRun
from cookbook.gates.runner import SuiteConfig, run_suite
from cookbook.recipe.gates_spec import GatesSpec

pytestmark = pytest.mark.engine

MODEL = "gemma3-270m"


def run(cpu_server, tmp_path, cfg: dict):
    spec = GatesSpec.model_validate({"spec_acceptance": {"calibrated_on": "test", **cfg}})
    bundle = asyncio.run(
        run_suite(
            SuiteConfig(
                base_url=cpu_server.base_url,
                model=MODEL,
                spec=spec,
                out_dir=tmp_path / "b",
                data=DataPaths.from_data_dir(tmp_path / "data"),
                echo=lambda _s: None,
            )
        )
    )
    return bundle, spec


def test_requests_carry_the_declared_sampling(cpu_server, tmp_path):
    cfg = {
        "prompts": "builtin:cookbook-tasks",
        "requests": 2,
        "max_tokens": 24,
        "temperature": 0.8,
        "top_p": 0.95,
        "min_acceptance_rate": 0.0,
    }
    bundle, spec = run(cpu_server, tmp_path, cfg)
    doc = json.loads((tmp_path / "b" / "results.json").read_text())
    g = doc["gates"]["spec_acceptance"]
    assert g["status"] == "passed", g["reason"]
    assert g["measured"]["sampling"] == {"temperature": 0.8, "top_p": 0.95}  # the bundle records it
    recorded = RecordedRun(tmp_path / "b", doc)
    recs = recorded.requests("spec_acceptance")
    assert {r["request"]["temperature"] for r in recs.values()} == {0.8}
    assert {r["request"]["top_p"] for r in recs.values()} == {0.95}
    # the re-check recomputes from these transcripts with the recipe's sampling ...
    got, _ = spec_acceptance.recompute(recorded, spec.spec_acceptance)
    assert got["completion_tokens"] == g["measured"]["completion_tokens"]
    # ... and refuses them under a recipe that declares greedy (the gate's old behaviour)
    greedy = GatesSpec.model_validate({"spec_acceptance": {**cfg, "calibrated_on": "t", "temperature": 0.0}})
    with pytest.raises(ValueError, match="was sent with .*0.8.*the recipe declares .*'temperature': 0.0"):
        spec_acceptance.recompute(recorded, greedy.spec_acceptance)


def test_absent_temperature_stays_greedy():
    """Recipes that declare no sampling keep the greedy requests of bundles recorded before the field."""
    cfg = GatesSpec.model_validate({"spec_acceptance": {"calibrated_on": "t"}}).spec_acceptance
    assert spec_acceptance.sampling(cfg) == {"temperature": 0.0}
    assert "temperature" not in cfg.model_dump(exclude_none=True)  # the content hash of old recipes is unchanged
