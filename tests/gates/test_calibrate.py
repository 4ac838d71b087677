"""cookbook gates calibrate: bars from the H200 recipe's committed bundle, written back into its recipe text."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from cookbook.evidence.status import bundle_path
from cookbook.files import repo_root
from cookbook.gates.calibrate import calibrated_gates
from cookbook.recipe.calibrated import NOTE, with_gates
from cookbook.recipe.resolve import resolve

SLUG = "gemma3-270m-h200"
RECIPE = repo_root() / "recipes" / SLUG / "recipe.yaml"


@pytest.fixture
def bundle():
    return bundle_path(resolve(SLUG).recipe.verified.bundle)  # not the engine-check bundle beside it


def _inputs(bundle):
    own = yaml.safe_load(RECIPE.read_text())["gates"]
    return own, json.loads((bundle / "results.json").read_text())


def test_bars_follow_the_stated_rules(bundle):
    own, results = _inputs(bundle)
    gates, changes = calibrated_gates(own, results, date="2026-12-01", where="test host", bundle=bundle.name)
    m = {g: results["gates"][g]["measured"] for g in results["gates"]}
    tput = m["speed"]["output_throughput"]
    assert gates["speed"]["min_output_throughput_1_stream"] == pytest.approx(tput["1"] / 2, 0.01)
    assert gates["speed"]["min_output_throughput_peak"] == pytest.approx(tput["256"] / 2, 0.01)  # the largest level
    ttft = m["speed"]["ttft_s"]["8192"]
    assert gates["speed"]["max_ttft_8k_s"] >= max(2 * ttft, ttft + 0.25)
    assert gates["stress"]["max_decode_gap_s"] >= 3 * m["stress"]["max_decode_gap_s"]
    # 9 codes hidden, all found: a fifth (2) may be missed
    assert gates["needles"]["min_found_fraction"] == pytest.approx(7 / 9, abs=0.01)
    assert gates["spec_acceptance"]["min_acceptance_rate"] <= m["spec_acceptance"]["acceptance_rate"] * 2 / 3
    assert gates["tools"].get("min_passed_fraction") is None  # no rule: no partial credit, untouched
    for name in ("greedy", "logprobs", "tools", "speed"):
        assert gates[name]["calibrated_on"].startswith(f"2026-12-01, test host, calibration run {bundle.name}: passed")
    assert "no bar to set" in gates["greedy"]["calibrated_on"]
    assert {c.gate for c in changes} == {"needles", "spec_acceptance", "stress", "speed"}


def test_a_failed_check_without_a_bar_refuses(bundle):
    own, results = _inputs(bundle)
    results["gates"]["greedy"]["status"] = "failed"
    with pytest.raises(ValueError, match="greedy: failed in the bundle"):
        calibrated_gates(own, results, date="d", where="w", bundle="b")
    own, results = _inputs(bundle)
    del results["gates"]["speed"]["measured"]["ttft_s"]
    with pytest.raises(ValueError, match="speed.max_ttft_2k_s: the bundle has no figure"):
        calibrated_gates(own, results, date="d", where="w", bundle="b")


def test_written_recipe_keeps_the_rest_and_drops_verified(bundle):
    own, results = _inputs(bundle)
    gates, _ = calibrated_gates(own, results, date="d", where="w", bundle="b")
    text = RECIPE.read_text()
    new = with_gates(text, gates)
    before = text[: text.index("\ngates:") + 1].removesuffix(NOTE)
    assert new.startswith(before + NOTE)  # comments and layout above the gates, byte for byte
    data = yaml.safe_load(new)
    assert "verified" not in data and data["gates"] == gates
    assert with_gates(new, gates) == new  # a second calibration does not stack notes


def test_command_dry_run_changes_nothing(bundle):
    before = RECIPE.read_bytes()
    r = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "maint", "gates", "calibrate", SLUG, str(bundle), "--dry-run"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "speed.min_output_throughput_1_stream" in r.stdout and "dry run" in r.stdout
    assert RECIPE.read_bytes() == before
    r = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "maint", "gates", "calibrate", "gemma3-270m-cpu", str(bundle)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "a bundle of 'gemma3-270m-h200', not gemma3-270m-cpu" in r.stderr
