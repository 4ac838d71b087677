"""benchmarks/speed_gate_vs_vllm_bench.py finds vLLM's CLI through an interpreter (`-m`), not a
binary beside this one, so it runs where the engine lives in another environment."""

import sys

import benchmark_scripts
import pytest


@pytest.fixture(scope="module")
def script():
    return benchmark_scripts.load("speed_gate_vs_vllm_bench")


def test_an_interpreter_given_runs_the_cli_module(script, tmp_path):
    py = tmp_path / "python"
    py.write_text("")
    assert script.vllm_command(str(py)) == [str(py), "-m", "vllm.entrypoints.cli.main"]


def test_this_interpreter_when_it_imports_vllm(script, monkeypatch):
    monkeypatch.setattr(script.importlib.util, "find_spec", lambda name: object())
    assert script.vllm_command() == [sys.executable, "-m", "vllm.entrypoints.cli.main"]


def test_else_the_vllm_on_path_else_one_message(script, monkeypatch, capsys):
    monkeypatch.setattr(script.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(script.shutil, "which", lambda name: "/opt/engine/bin/vllm")
    assert script.vllm_command() == ["/opt/engine/bin/vllm"]
    monkeypatch.setattr(script.shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match="pass --vllm-python"):
        script.vllm_command()
    with pytest.raises(SystemExit, match="no such interpreter"):
        script.vllm_command("/nonexistent/python")


def test_min_waves_raises_only_the_levels_it_must(script):
    assert script.requests_per_level(64, 1, [1, 16, 64]) == {1: 64, 16: 64, 64: 64}
    assert script.requests_per_level(64, 8, [1, 16, 64]) == {1: 64, 16: 128, 64: 512}


def test_min_waves_below_one_is_refused(script, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["speed_gate_vs_vllm_bench.py", "--min-waves", "0"])
    with pytest.raises(SystemExit, match="--min-waves 0: give 1 or more"):
        script.main()


def test_repeats_below_one_is_refused(script, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["speed_gate_vs_vllm_bench.py", "--repeats", "0"])
    with pytest.raises(SystemExit, match="--repeats 0: give 1 or more"):
        script.main()


def test_median_ratio_is_over_each_levels_pairs_and_skips_missing_figures(script):
    def row(c, gate_tps, bench_tps, ttft=None):
        gate = {"output_throughput": gate_tps, "median_ttft_ms": ttft}
        return {"concurrency": c, "gate": gate, "bench": {"output_throughput": bench_tps, "median_ttft_ms": 10.0}}

    # the server drifts between pairs (100 -> 80 -> 120) while each pair agrees within 2%
    rows = [row(16, 102, 100), row(16, 80, 81), row(16, 119, 120), row(64, 150, 100, ttft=12.0)]
    got = script.median_ratios(rows)
    assert got[(16, "output_throughput")] == {"pairs": 3, "median": 0.992, "lowest": 0.988, "highest": 1.02}
    assert script.agrees(got[(16, "output_throughput")]["median"]) == "yes"
    assert (16, "median_ttft_ms") not in got  # the gate had no figure in any pair
    assert got[(64, "median_ttft_ms")]["median"] == 1.2
    assert script.agrees(got[(64, "output_throughput")]["median"]) == "NO"
    assert script.agrees(None) == "NO"
