"""The Hopper platforms (h100, h200): each carries its vendor memory figure and a source for it,
the runtime total the planner uses, and `cookbook plan --platform h100` plans on it."""

import json

from click.testing import CliRunner

from cookbook import platforms
from cookbook.cli import main


def test_h100_and_h200_carry_memory_figures_with_sources():
    for pid, gib in (("h100", 80), ("h200", 141)):
        p = platforms.get(pid)
        assert p is not None and p.arch == "sm90" and p.memory_gib == gib
        assert "datasheet" in p.memory_source
        mib, why = platforms.DEVICE_MIB[pid]
        assert p.device_mib == mib and why
        # the runtime total sits under the marketed figure read as GiB (the HBM stacks) and above 95% of it
        assert 0.95 * gib * 1024 < mib < gib * 1024


def test_plan_on_h100_uses_its_runtime_total():
    r = CliRunner().invoke(main, ["plan", "dsv4-4", "--platform", "h100", "--json"])
    assert r.exit_code == 0, r.output
    setup = json.loads(r.stdout[: r.stdout.rindex("}") + 1])["setup"]
    assert setup["platform"] == "h100" and setup["device_bytes"] == 81079 * 2**20
    text = CliRunner().invoke(main, ["plan", "dsv4-4", "--platform", "h100"]).output
    assert "4x h100" in text and "device memory 79.18 GiB" in text


def test_unknown_platform_is_still_refused():
    r = CliRunner().invoke(main, ["plan", "dsv4-4", "--platform", "h300"])
    assert r.exit_code == 2 and "h300" in r.output


def test_a_recipe_without_an_mtp_layer_plans_its_experts_over_expert_parallel_ranks():
    # k3-mxfp4-16x-h200 names no mtp_layers: the planner once stopped with KeyError 'mtp'
    r = CliRunner().invoke(main, ["plan", "k3-mxfp4-16x-h200", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout[: r.stdout.rindex("}") + 1])
    groups = {g["name"]: g for g in out["weights"]["groups"]}
    assert "mtp" not in groups and out["setup"]["dp"] == 2 and out["setup"]["expert_parallel"]
    # the routed experts spread over all 16 GPUs (TP 8 x DP 2), the rest over the 8 of a TP group
    assert groups["routed_experts"]["per_gpu_bytes"] == groups["routed_experts"]["bytes"] // 16


def test_kimi_k3_is_refused_on_an_engine_without_it():
    r = CliRunner().invoke(main, ["launch", "k3-mxfp4-16x-h200", "--set", "image.engine.version=0.26.0"])
    assert r.exit_code != 0 and "vLLM 0.26.0 has no Kimi K3" in r.output and "0.27.1" in r.output
    r = CliRunner().invoke(main, ["launch", "k3-mxfp4-16x-h200", "--nodes", "2", "--node-rank", "1"])
    assert r.exit_code == 0 and "--headless" in r.output and "--data-parallel-start-rank 1" in r.output
