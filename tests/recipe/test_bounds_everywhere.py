"""Issue 64, items 9 and 10: one set of bounds in recipe resolution, so plan, launch, serve, show and
fetch refuse the same hostile values with one message (exit 2, a help line, no traceback), and
integer-string limits, NUL bytes and non-decimal integers are each one message. Issue 63: plan
refuses before it prints impossible figures (no negative pool, no "-9 fit at once")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cookbook.cli import main

REPO = Path(__file__).resolve().parents[2]
CPU = "gemma3-270m-cpu"
HUGE = "9" * 5000

HOSTILE = [
    ("env.VLLM_CPU_KVCACHE_SPACE=0", "above 0"),
    ("env.VLLM_CPU_KVCACHE_SPACE=-5", "above 0"),
    ("env.VLLM_CPU_KVCACHE_SPACE=9223372036854775808", "int64"),
    ("env.VLLM_CPU_KVCACHE_SPACE=nan", "expected a number"),
    ("max_model_len=40000", "above the model's native context of 32,768"),
    ("max_model_len=0x100", "plain decimal"),
    ("max_model_len=010", "plain decimal"),
    ("max_model_len=1_024", "plain decimal"),
    (f"max_model_len={HUGE}", "5,000 characters"),
    (f"env.VLLM_CPU_KVCACHE_SPACE={HUGE}", "5,000 characters"),
    ("speculative_config={bad json", "not JSON"),
    ("speculative_config=[1, 2]", "not JSON"),  # YAML list: refused by the flag's type
    ("hardware.platform=h300", "the platform is the recipe's identity"),
    ("hardware.platform=mi300x", "the platform is the recipe's identity"),
    ("model.architecture.kv_heads=1208925819614629174706176", "beyond int64"),
    ("model.architecture.layers=99999999999999999999", "beyond int64"),
    ("tensor_parallel_size=3", "does not divide"),
]
COMMANDS = {
    "plan": ["plan"],
    "launch": ["launch"],
    "show": ["show"],
    "serve": ["serve", "--dry-run"],
    "fetch": ["fetch", "--dry-run"],
}


@pytest.mark.parametrize("item,why", HOSTILE, ids=[h[0][:40] for h in HOSTILE])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_refuses_the_same_value_in_one_message(command, item, why):
    head, *rest = COMMANDS[command]
    res = CliRunner().invoke(main, [head, CPU, *rest, "--set", item])
    out = res.output
    assert res.exit_code == 2, out
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in out and out.count("error:") == 1 and "help:" in out, out
    if why != "not JSON" or "{" in item:
        assert why in out, out
    else:
        assert "speculative_config" in out, out


def test_plan_refuses_before_it_prints_impossible_figures():
    res = CliRunner().invoke(main, ["plan", CPU, "--set", "env.VLLM_CPU_KVCACHE_SPACE=30"])
    assert res.exit_code == 2, res.output
    assert "left" not in res.output and "-22" not in res.output and "KV pool" not in res.output, res.output
    assert "does not fit" in res.output and "VLLM_CPU_KVCACHE_SPACE" in res.output
    res = CliRunner().invoke(main, ["plan", "glm52-fp8-8x-h200", "--set", "gpu_memory_utilization=0.01"])
    assert res.exit_code == 2 and "fit at once" not in res.output and "left" not in res.output, res.output
    assert "does not fit" in res.output


@pytest.mark.parametrize(
    "args,why",
    [
        (["--gpus", "4096"], "has no GPUs"),
        (["--platform", ""], "not in the platform catalogue"),
        (["--platform", "h300"], "not in the platform catalogue"),
    ],
)
def test_plan_options_are_bounded(args, why):
    res = CliRunner().invoke(main, ["plan", CPU, *args])
    assert res.exit_code == 2 and why in res.output and "Traceback" not in res.output, res.output


def test_plan_gpus_beyond_the_heads_is_refused():
    res = CliRunner().invoke(main, ["plan", "glm52-fp8-8x-h200", "--gpus", "4096"])
    assert res.exit_code == 2 and "does not divide the model's 64 attention heads" in res.output, res.output


@pytest.mark.parametrize("value", ["nan", "-1", "0", "inf"])
def test_serve_ready_timeout_is_a_finite_positive_number(value):
    res = CliRunner().invoke(main, ["serve", CPU, "--dry-run", "--ready-timeout-s", value])
    assert res.exit_code == 2 and "--ready-timeout-s" in res.output, res.output


@pytest.mark.parametrize(
    "edit,why",
    [
        (lambda t: t.replace("layers: 18", f"layers: {HUGE}"), "5,000 digits"),
        (lambda t: t.replace("summary: Gemma", "summary: Ge\0mma"), "control characters"),
        (
            lambda t: t.replace('VLLM_CPU_KVCACHE_SPACE:\n    value: "2"', 'VLLM_CPU_KVCACHE_SPACE:\n    value: "-5"'),
            "above 0",
        ),
    ],
    ids=["5000-digit integer", "NUL byte", "negative KV space"],
)
@pytest.mark.parametrize("command", ["show", "launch", "plan", "lint"])
def test_a_hostile_recipe_file_is_one_message(tmp_path, monkeypatch, edit, why, command):
    d = tmp_path / "recipes" / CPU
    shutil.copytree(REPO / "recipes" / CPU, d, ignore=shutil.ignore_patterns("evidence"))
    f = d / "recipe.yaml"
    f.write_text(edit(f.read_text().split("# written by")[0]))
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    res = CliRunner().invoke(main, [command, str(f) if command == "lint" else CPU])
    assert res.exit_code != 0 and why in res.output and "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)


@pytest.mark.parametrize("argv", [["launch"], ["serve", "--dry-run"], ["plan"]])
def test_a_configuration_the_plan_refuses_is_never_rendered(argv):
    """Issue 64, item 9: launch rendered gpu_memory_utilization=0.01 on the 8x H200 recipe, which
    plan refuses (the weights alone exceed what vLLM may use); now the three refuse alike."""
    slug, bad = "glm52-fp8-8x-h200", "gpu_memory_utilization=0.01"
    r = CliRunner().invoke(main, [argv[0], slug, *argv[1:], "--set", bad])
    assert r.exit_code == 2 and "does not fit" in r.stderr and "vllm serve" not in r.stdout, r.output
    assert "Traceback" not in r.output
    ok = CliRunner().invoke(main, [argv[0], slug, *argv[1:], "--set", "gpu_memory_utilization=0.9"])
    assert ok.exit_code == 0, ok.output
