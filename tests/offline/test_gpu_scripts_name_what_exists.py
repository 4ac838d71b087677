"""The GPU host's scripts run where nothing can be fixed in place: a device session spent on a path
that moved, or on a command's old spelling that a release drops, is lost. Every repository path
they name exists, and every cookbook command they run is a current spelling."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (ROOT / "scripts" / "offline-gpu").iterdir() if p.is_file())
PATH = re.compile(r"\b(?:scripts|src|benchmarks|fixes|tests|recipes)/[A-Za-z0-9_./-]*[A-Za-z0-9_]")
COMMAND = re.compile(r"cookbook\.cli((?: [a-z][a-z-]*)+)")


def test_the_scripts_are_found():
    assert {"engine-check", "side-by-side", "receive.py", "serve"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_repository_path_a_gpu_script_names_exists(script):
    missing = sorted({m for m in PATH.findall(script.read_text()) if not (ROOT / m).exists()})
    assert not missing, f"{script.name} names {missing}, which this checkout lacks"


def test_every_cookbook_command_the_gpu_scripts_run_is_a_current_spelling():
    commands = {m.strip() for p in SCRIPTS for m in COMMAND.findall(p.read_text())}
    assert {"launch", "maint fixes apply", "convert dummy-checkpoint"} <= commands
    for words in sorted(commands):
        p = subprocess.run(
            [sys.executable, "-m", "cookbook.cli", *words.split(), "--help"], capture_output=True, text=True, cwd=ROOT
        )
        assert p.returncode == 0, f"cookbook {words}: {p.stderr[-300:]}"
        assert "note:" not in p.stderr, f"cookbook {words} is an old spelling: {p.stderr.strip()}"


@pytest.mark.parametrize("args", [[], ["start"]], ids=["bare", "unknown-mode"])
def test_the_engine_check_script_says_how_to_call_it_before_looking_for_a_payload(tmp_path, args):
    p = subprocess.run(
        [str(ROOT / "scripts" / "offline-gpu" / "engine-check"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OUT": str(tmp_path / "out")},
        timeout=30,
    )
    assert p.returncode == 2
    assert "engine-check background CASE" in p.stderr and "no payload" not in p.stderr
