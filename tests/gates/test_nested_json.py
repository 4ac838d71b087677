"""JSON nested thousands deep, where a bundle or a report is read (issue 48, item 12): results.json,
a transcript line, a bisect step's bundle, and `gates verify` on such a bundle each answer with one
message, never a RecursionError."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cookbook.bisect.probe import outcome_from_bundle
from cookbook.gates import recorded

DEEP = "[" * 200_000 + "]" * 200_000


def test_read_json_refuses_a_deep_file(tmp_path):
    f = tmp_path / "results.json"
    f.write_text('{"gates": ' + DEEP + "}")
    with pytest.raises(ValueError, match="nests more than"):
        recorded.read_json(f)


def test_a_deep_transcript_line_is_refused(tmp_path):
    (tmp_path / "transcripts").mkdir()
    (tmp_path / "transcripts" / "greedy.jsonl").write_text('{"ok": 1}\n' + DEEP + "\n")
    with pytest.raises(ValueError, match="line 2 nests too deeply"):
        recorded.transcript(tmp_path, "greedy")


def test_a_bisect_step_on_a_deep_bundle_is_a_skip(tmp_path):
    (tmp_path / "results.json").write_text(DEEP)
    out = outcome_from_bundle(tmp_path, "greedy")
    assert out.verdict == "skip" and "no readable" in out.reason


def test_gates_verify_on_a_deep_bundle_is_one_message(tmp_path):
    (tmp_path / "results.json").write_text('{"gates": ' + DEEP + "}")
    (tmp_path / "manifest.json").write_text(DEEP)
    r = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "gates", "verify", "gemma3-270m-cpu", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode in (1, 2) and "Traceback" not in r.stderr and "RecursionError" not in r.stderr, r.stderr
    assert r.stderr.startswith("error:")
