"""benchmarks/dummy_routing.py: the modelled router under vLLM's dummy weights. The bias concentrates a
batch on a few experts, zero bias spreads it like uniform routing: the reason the plugin's dummy fill
zeroes the bias (cookbook.vllm_plugin.mxfp4_moe.balance_dummy_routing)."""

from __future__ import annotations

import sys

import benchmark_scripts
import pytest


@pytest.fixture(scope="module")
def routing():
    yield benchmark_scripts.load("dummy_routing")
    sys.modules.pop("dummy_routing", None)


def test_the_shape_is_the_recipes(routing):
    assert (routing.HIDDEN, routing.EXPERTS, routing.TOP_K) == (4096, 256, 6)


def test_one_token_reaches_its_top_k_either_way(routing):
    assert routing.distinct_experts(1, 0) == {"dummy bias": routing.TOP_K, "zero bias": routing.TOP_K}


@pytest.mark.parametrize("seed", [0, 1])
def test_dummy_bias_concentrates_a_batch_and_zero_spreads_it(routing, seed):
    n = routing.distinct_experts(64, seed)
    assert n["dummy bias"] <= 16  # a handful of experts, whatever the tokens
    expected = routing.uniform_expectation(64)
    assert abs(n["zero bias"] - expected) <= 0.1 * expected


def test_table_prints_every_batch_size(routing, capsys):
    assert routing.main(["--tokens", "1,16", "--trials", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 1")]
    assert [r.split("|")[1].strip() for r in rows] == ["1", "16"]
