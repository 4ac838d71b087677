"""benchmarks/parallel_sweep.py against a real vLLM: the pinned CPU engine serving the embedded
default recipe (Gemma 3 270M): the session's shared server (tests/conftest.py `cpu_server`), started
by its own launch block with the log going to a file."""

from __future__ import annotations

import json

import benchmark_scripts
import pytest


def _module():
    return benchmark_scripts.load("parallel_sweep")


def test_bad_arguments_are_refused_with_one_line(tmp_path, capsys):
    sweep = _module()
    for argv, what in (
        (["http://x", "--streams", "1,four"], "--streams '1,four': give whole numbers"),
        (["http://x", "--log", str(tmp_path / "none.log")], "no such file"),
        (["http://x", "--waves", "0"], "must be positive"),
    ):
        with pytest.raises(SystemExit) as exc:
            sweep.main(argv)
        assert exc.value.code == 2 and what in capsys.readouterr().err


@pytest.mark.engine
def test_sweep_and_kv_pool_of_a_real_cpu_server(cpu_server, tmp_path, capsys):
    sweep = _module()
    out = tmp_path / "sweep.json"
    argv = [cpu_server.base_url, "--log", str(cpu_server.log), "--streams", "1,4", "--waves", "1"]
    argv += ["--max-tokens", "8", "--predicted-kv-tokens", "1000", "--json", str(out)]
    assert sweep.main(argv) == 0
    printed = capsys.readouterr().out
    with capsys.disabled():
        print("\n" + printed)
    figures = json.loads(out.read_text())
    rows = figures["sweep"]
    assert [r["streams"] for r in rows] == [1, 4] and [r["total_tokens"] for r in rows] == [8, 32]
    assert all(r["aggregate_tok_s"] > 0 and r["median_ttft_s"] > 0 for r in rows)
    pools = [p for p in figures["kv_pools"] if "kv_tokens" in p]
    assert pools and pools[0]["pool"] == "CPU" and pools[0]["kv_tokens"] > 0, figures["kv_pools"]
    assert f"CPU {pools[0]['kv_tokens']:,} tokens" in printed and "1,000 tokens" in printed
