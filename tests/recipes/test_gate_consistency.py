"""`cookbook lint`'s checks between a recipe's gates and its launch block (R026-R028, issue 65): each
rule has a recipe edited to break it, and the committed recipes pass them all."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from seed_common import ROOT

from cookbook.recipe.lint import lint_file


@pytest.fixture
def recipes(tmp_path, monkeypatch):
    """A copy of recipes/ (recipe files only) that a test may edit."""
    root = tmp_path / "recipes"
    for f in (ROOT / "recipes").glob("*/recipe.yaml"):
        (root / f.parent.name).mkdir(parents=True)
        shutil.copy(f, root / f.parent.name / "recipe.yaml")
    monkeypatch.setenv("COOKBOOK_RECIPES", str(root))
    return root


def edit(root: Path, slug: str, old: str, new: str) -> Path:
    p = root / slug / "recipe.yaml"
    text = p.read_text()
    assert old in text, f"{slug}: {old!r} not found"
    p.write_text(text.replace(old, new, 1))
    return p


def ids(path: Path) -> list[str]:
    return [d.kind.id for d in lint_file(path) if d.kind.level == "error"]


def messages(path: Path, id: str) -> str:
    return "\n".join(d.render() for d in lint_file(path) if d.kind.id == id)


def test_committed_recipes_pass(recipes):
    for f in sorted(recipes.glob("*/recipe.yaml")):
        got = [i for i in ids(f) if i in ("R026", "R027", "R028")]
        assert got == [], f"{f.parent.name}: {got}"


def test_vision_gate_without_projector(recipes):
    p = edit(recipes, "glm52-2", "gates:\n  speed:", "gates:\n  vision: {calibrated_on: test}\n  speed:")
    assert "R026" in ids(p)
    assert "does not load the vision projector (mmproj-GLM-5.2-Vision-f16.gguf)" in messages(p, "R026")


def test_vision_gate_on_a_text_model(recipes):
    p = edit(recipes, "dsv4-2", "hardware: {gpus: 2}", "hardware: {gpus: 2}\ngates:\n  vision: {calibrated_on: test}")
    assert "the model has no vision" in messages(p, "R026")


def test_tools_gate_without_parser(recipes):
    p = edit(recipes, "glm52-2", "gates:\n  speed:", "gates:\n  tools: {calibrated_on: test}\n  speed:")
    assert "no --tool-call-parser" in messages(p, "R026")


def test_tools_auto_without_auto_tool_choice(recipes):
    p = edit(
        recipes,
        "glm52-nvfp4-4x-rtxpro6000",
        "    enable_auto_tool_choice: {value: true,",
        "    enable_auto_tool_choice: {value: false,",
    )
    assert "no --enable-auto-tool-choice" in messages(p, "R026")


def test_reasoning_split_without_parser(recipes):
    p = edit(
        recipes,
        "glm52-nvfp4-4x-rtxpro6000",
        "  tools:\n    calibrated_on:",
        "  reasoning_split: {calibrated_on: test}\n  tools:\n    calibrated_on:",
    )
    assert "no --reasoning-parser" in messages(p, "R026")


def test_spec_acceptance_without_speculation(recipes):
    p = edit(recipes, "glm52-nvfp4-4x-rtxpro6000-tp4-1m", "  spec_acceptance: null", "  spec_acceptance: {}")
    assert "no --speculative-config" in messages(p, "R026")


def test_rate_and_length_bars_disagree(recipes):
    # the bars glm52-base had before issue 65: 2.7 at 3 draft tokens needs a rate of 0.567, not 0.25
    edit(recipes, "glm52-base", "min_mean_acceptance_length: 1.75", "min_mean_acceptance_length: 2.7")
    p = recipes / "glm52-2" / "recipe.yaml"
    assert "R027" in ids(p)
    assert "rate 0.25 implies 1.750 and length 2.7 implies rate 0.567; min_acceptance_rate is inert" in messages(
        p, "R027"
    )


def test_calibrated_bars_agree_within_their_rounding(recipes):
    # `serve --calibrate` from rate 0.869 at k=3 (mean length 3.607): two thirds of each, floored to 0.01
    edit(recipes, "glm52-base", "min_acceptance_rate: 0.25", "min_acceptance_rate: 0.57")
    edit(recipes, "glm52-base", "min_mean_acceptance_length: 1.75", "min_mean_acceptance_length: 2.73")
    assert "R027" not in ids(recipes / "glm52-2" / "recipe.yaml")


def test_length_bar_above_what_k_allows(recipes):
    p = edit(
        recipes,
        "glm52-mxfp4-8x-gaudi2",
        "    min_acceptance_rate: 0.70",
        "    min_acceptance_rate: 0.70\n    min_mean_acceptance_length: 2.2",
    )
    assert "can never be met: with 1 draft tokens the mean acceptance length is at most 2" in messages(p, "R027")


def test_ngram_bars_are_independent(recipes):
    # n-gram lookup proposes fewer than k tokens where nothing matches: its rate and length do not imply each other
    p = recipes / "gemma3-270m-cpu" / "recipe.yaml"
    assert "R027" not in ids(p)


def test_speed_level_beyond_max_num_seqs(recipes):
    # glm52-2 as it was: a 64-concurrent level on a server admitting 32
    p = edit(recipes, "glm52-2", "sweep_concurrencies: [1, 4, 8, 16, 32]", "sweep_concurrencies: [1, 4, 8, 16, 32, 64]")
    assert "R028" in ids(p)
    assert "sweep level(s) [64] exceed the 32 concurrent requests the block admits (max_num_seqs 32)" in messages(
        p, "R028"
    )
    # where the source measured it so, a quoted reason lets it stand
    edit(
        recipes, "glm52-2", "    sweep_requests: 64", "    beyond_max_num_seqs: 'quoted source'\n    sweep_requests: 64"
    )
    assert "R028" not in ids(p)


def test_data_parallel_replicas_admit_more(recipes):
    p = edit(
        recipes,
        "k3-8",
        "hardware: {gpus: 8}",
        "hardware: {gpus: 8}\ngates:\n  speed: {calibrated_on: t, sweep_concurrencies: [1, 64], sweep_requests: 64}",
    )
    edit(recipes, "k3-8", "    tensor_parallel_size:", "    max_num_seqs: 16\n    tensor_parallel_size:")
    assert "R028" not in ids(p)  # 16 a replica x DP 4 = 64
    edit(recipes, "k3-8", "max_num_seqs: 16", "max_num_seqs: 15")
    assert "exceed the 60 concurrent requests the block admits (max_num_seqs 15 x data_parallel_size 4)" in messages(
        p, "R028"
    )


def test_cli_lint_exits_1_on_a_broken_recipe(recipes):
    edit(recipes, "glm52-2", "gates:\n  speed:", "gates:\n  vision: {calibrated_on: test}\n  speed:")
    res = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "lint", str(recipes / "glm52-2" / "recipe.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert res.returncode == 1 and "R026" in res.stdout + res.stderr


@pytest.mark.parametrize(
    "slug,item,words",
    [
        ("glm52-mxfp4-8x-gaudi2", "gates.spec_acceptance.temperature=9", "greater than the maximum of 2.0"),
        ("glm52-mxfp4-8x-gaudi2", "gates.spec_acceptance.temperature=-0.1", "less than the minimum of 0"),
        ("glm52-mxfp4-8x-gaudi2", "gates.spec_acceptance.top_p=0", "less than or equal to the minimum of 0"),
        ("glm52-2", "gates.speed.beyond_max_num_seqs=''", "gates.speed.beyond_max_num_seqs"),
        ("glm52-8", "plan.expert_parallel_kv_cut_gib=-1", "less than or equal to the minimum of 0"),
        ("glm52-2", "model.architecture.draft.compressed_kv_dtype=''", "compressed_kv_dtype"),
    ],
)
def test_new_fields_refuse_bad_values(slug, item, words):
    """The fields issue 65 added, given hostile values through --set: one refusal, exit 2, nothing printed."""
    res = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "launch", slug, "--set", item],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert res.returncode == 2 and res.stdout == "", res.stdout
    assert words in res.stderr and "help:" in res.stderr, res.stderr
