"""End to end against a real vLLM (the pinned CPU engine) serving Gemma 3 270M: the session's
shared server (tests/conftest.py `cpu_server`, the embedded default recipe launched by the
product's own code). The test that kills its server kills a stand-in (openai_standin.py).
"""

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from cpu_engine import free_port

from cookbook.cli import main
from cookbook.gates.data import DataPaths
from cookbook.gates.runner import SuiteConfig, run_suite
from cookbook.recipe.gates_spec import GatesSpec

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests" / "helpers" / "openai_standin.py"


@pytest.fixture
def server(cpu_server):
    return {"url": cpu_server.base_url}


@pytest.fixture
def standin():
    """A stand-in OpenAI server in a process of its own, for the test that kills it."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(STANDIN), str(port), "gemma3-270m"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield {"url": f"http://127.0.0.1:{port}", "proc": proc}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_full_suite_writes_a_complete_bundle(server, recipes_dir, tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv("COOKBOOK_ROOT", str(tmp_path))  # verify takes only a bundle inside the checkout
    out = tmp_path / "bundle"
    lock = tmp_path / "lock.txt"
    lock.write_text(
        subprocess.run([str(REPO / ".venv/bin/python"), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    )
    res = CliRunner().invoke(
        main,
        [
            "gates",
            "run",
            "gates-cpu",
            "--base-url",
            server["url"],
            "--out",
            str(out),
            "--data-dir",
            str(data_dir),
            "--env-lock",
            str(lock),
        ],
    )
    doc = json.loads((out / "results.json").read_text())
    assert doc["complete"] and doc["fault"] is None, res.output
    assert list(doc["gates"]) == doc["declared_gates"] and len(doc["gates"]) == 10
    failed = [n for n, g in doc["gates"].items() if g["status"] != "passed"]
    assert res.exit_code == (1 if failed else 0), res.output
    for name, g in doc["gates"].items():
        assert g["fault"] is None, (name, g["reason"])  # every gate ran to its end
        assert g["formulas"] and g["measured"] and g["wall_s"] > 0, name
        lines = (out / "transcripts" / f"{name}.jsonl").read_text().splitlines()
        assert lines and all(json.loads(x)["status"] == 200 for x in lines), name
    for f in (
        "models.json",
        "metrics-before.prom",
        "metrics-after.prom",
        "recipe.resolved.json",
        "environment.lock",
        "summary.txt",
        "speed-sweep.png",
    ):
        assert (out / f).is_file() and (out / f).stat().st_size > 0, f
    assert (out / "speed-sweep.png").read_bytes()[:4] == b"\x89PNG"
    from cookbook.recipe import resolve

    assert doc["recipe_hash"] == resolve("gates-cpu").content_hash
    m = doc["gates"]
    assert m["greedy"]["status"] == "passed"  # greedy output repeats exactly
    assert m["logprobs"]["status"] == "passed" and m["logprobs"]["measured"]["tokens_checked"] == 2 * 8
    assert m["spec_acceptance"]["measured"]["draft_tokens"] > 0  # ngram drafting really ran
    assert m["stress"]["measured"]["prefill_overlapped_decodes"] is True
    assert m["speed"]["measured"]["prefix_cache_hits_during_ttft"] in (0, 0.0, None)
    # each timed TTFT prompt comes after an untimed one of the same length with other tokens
    speed_recs = [json.loads(x) for x in (out / "transcripts" / "speed.jsonl").read_text().splitlines()]
    by_tag = {r.get("tag"): (i, r.get("request", {}).get("prompt")) for i, r in enumerate(speed_recs)}
    (i_cold, cold_ids), (i_timed, timed_ids) = by_tag["ttft2048-warmup"], by_tag["ttft2048"]
    assert i_cold < i_timed and len(cold_ids) == len(timed_ids) and cold_ids != timed_ids
    assert set(m["speed"]["measured"]["ttft_cold_s"]) == set(m["speed"]["measured"]["ttft_s"]) == {"2048"}
    assert m["needles"]["items"][0]["prompt_tokens"] >= 0.9 * 512
    # verify agrees with the outcome: writes the block only if everything passed
    v = CliRunner().invoke(main, ["gates", "verify", "gates-cpu", str(out)])
    assert v.exit_code == (1 if failed else 0), v.output
    from cookbook.evidence.status import status_of

    assert status_of(resolve("gates-cpu")) == ("unverified" if failed else "verified")
    print(res.output)


def test_wrong_model_name_fails_clearly(server, recipes_dir, tmp_path, data_dir):
    out = tmp_path / "bundle"
    res = CliRunner().invoke(
        main,
        [
            "gates",
            "run",
            "gates-cpu",
            "--base-url",
            server["url"],
            "--out",
            str(out),
            "--model",
            "not-this-model",
            "--only",
            "greedy",
        ],
    )
    assert res.exit_code == 1
    doc = json.loads((out / "results.json").read_text())
    assert doc["fault"] == "wrong_model"
    g = doc["gates"]["greedy"]
    assert g["status"] == "failed" and "serves ['gemma3-270m']" in g["reason"]


def _suite(server, tmp_path, data_dir, gates: dict) -> dict:
    cfg = SuiteConfig(
        base_url=server["url"],
        model="gemma3-270m",
        spec=GatesSpec.model_validate(gates),
        out_dir=tmp_path / "bundle",
        data=DataPaths.from_data_dir(data_dir),
        echo=lambda s: None,
    )
    return asyncio.run(run_suite(cfg)).doc


def test_gate_timeout_keeps_partial_results(server, tmp_path, data_dir):
    doc = _suite(
        server,
        tmp_path,
        data_dir,
        {
            # 40 problems one at a time, each running to 48 tokens (no stop string they would write), take far
            # longer than 6 s (25 s or more at 80 tok/s)
            "gsm8k": {
                "calibrated_on": "test",
                "n": 40,
                "shots": 2,
                "max_tokens": 48,
                "min_correct_fraction": 0,
                "max_concurrent_requests": 1,
                "timeout_s": 6,
                "stop": ["@@"],
            },
            "greedy": {"calibrated_on": "test", "prompts": ["Say hi."], "max_tokens": 4},
        },
    )
    g = doc["gates"]["gsm8k"]
    assert g["status"] == "failed" and g["fault"] == "timeout" and "timed out after 6 s" in g["reason"]
    assert 0 < len(g["items"]) < 40  # what finished is kept
    assert doc["gates"]["greedy"]["status"] == "passed"  # later gates still run
    assert doc["complete"]


def test_server_killed_mid_run(standin, tmp_path, data_dir):
    # Kill the server while the stress gate streams; speed (after it) must say it did not run.
    proc = standin["proc"]
    killer = threading.Timer(3.0, lambda: os.killpg(proc.pid, signal.SIGKILL))
    killer.start()
    try:
        doc = _suite(
            standin,
            tmp_path,
            data_dir,
            {
                "stress": {
                    "calibrated_on": "test",
                    "decodes": 2,
                    "decode_max_tokens": 4000,
                    "prefill_tokens": [1024],
                    "max_decode_gap_s": 60,
                    "timeout_s": 300,
                },
                "speed": {"calibrated_on": "test", "ttft_prompts_tokens": [], "sweep_concurrencies": [1]},
            },
        )
    finally:
        killer.cancel()
    assert doc["complete"] and doc["fault"] == "server_down"
    stress, speed = doc["gates"]["stress"], doc["gates"]["speed"]
    assert stress["status"] == "failed" and stress["fault"] == "server_down"
    assert "server connection lost" in stress["reason"]
    assert speed["status"] == "failed" and speed["fault"] == "server_down" and "not run" in speed["reason"]
    lines = (tmp_path / "bundle" / "transcripts" / "stress.jsonl").read_text().splitlines()
    assert lines  # the partial exchange is on disk
