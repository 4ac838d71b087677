"""The engine-check runs made on the H200 (2026-12-05, vLLM 0.26.0): the committed bundles re-check
as engine-checked from their own files, and the deliberately broken copy run there (the GLM-5.2
block plus a flag vLLM does not have) does not earn the status. Real device output, no stand-in.

The DeepSeek-V4-Flash recipes' max_num_seqs fell (30 -> 9, 24 -> 7) when the plan learned vLLM's
DeepSeek-V4 layout, then rose to 512 (and GLM-5.2 FP8's from 5 to 32) when it was chosen for the
traffic the peer states (issue 68): their runs served the old blocks, so their bundles are stale until
the H200 runs the new ones, and re-planning the old runs is refused (the block is no longer the recipe's)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.evidence import engine_check as E
from cookbook.recipe.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("gemma3-270m-h200", "dsv3-perf-h200")
# recipes that leave their attention geometry to the checkpoint: planned with the run's config.json
GEOMETRY_FROM_CONFIG = ("gemma3-270m-h200", "dsv3-perf-h200")
AWAITING_RERUN = ("dsv4-flash-8x-h200", "dsv4-flash-4x-h200", "glm52-fp8-8x-h200")
# Their runs predate the recipe hash covering the files a recipe serves with (issue 64, item 4: the
# chat template, the 6-layer config.json), so they are stale until the H200 runs them again.
STALE_BY_FILE_HASH = ("gemma3-270m-h200", "dsv3-perf-h200")
BROKEN = ROOT / "recipes" / "glm52-fp8-8x-h200" / "engine-check" / "broken-run"


@pytest.mark.parametrize("slug", CHECKED)
def test_the_h200_bundle_re_checks_as_engine_checked(slug):
    r = resolve(ROOT / "recipes" / slug / "recipe.yaml")
    word, reasons = E.status(r)
    if slug in STALE_BY_FILE_HASH:
        assert r.files and (word, reasons) == (E.STALE, [f"the recipe changed after the run ({E.bundles(r)[-1].name})"])
    else:
        assert (word, reasons) == (E.ENGINE_CHECKED, [])
    record = json.loads((E.bundles(r)[-1] / E.RECORD).read_text())
    assert record["rc"].startswith("ready") and record["answered_choices"] >= 1
    assert set(record["comparison"]) == {"kv_bytes_per_token", "pool_gib", "pool_tokens", "max_concurrency"}
    assert record["comparison"]["kv_bytes_per_token"]["off"] <= E.TOLERANCE
    # a figure more than 5% off the plan carries its explanation; one within 5% needs none
    for key, c in record["comparison"].items():
        assert c["off"] <= E.TOLERANCE or record["explanations"].get(key), key
    # vLLM parsed the recipe's own values (tensor_parallel_size 1 is its default, so it is not listed)
    args = record["vllm"]["args"]
    for key in ("max_num_seqs", "max_model_len", "kv_cache_dtype", "gpu_memory_utilization"):
        if key in r.recipe.serve.args and r.recipe.serve.args[key].value is not None:
            assert args[key] == r.recipe.serve.args[key].value, key
    assert "tensor_parallel_size" not in args and args["load_format"] == "dummy"
    assert any("backend" in b.lower() for b in record["vllm"]["backends"])


@pytest.mark.parametrize("slug", CHECKED)
def test_the_plan_reads_the_geometry_where_the_recipe_gives_none(slug):
    r = resolve(ROOT / "recipes" / slug / "recipe.yaml")
    record = json.loads((E.bundles(r)[-1] / E.RECORD).read_text())
    if slug in GEOMETRY_FROM_CONFIG:
        assert record["geometry_from"] == "recipe, then the checkpoint's config.json"
        # without the config the plan has no KV bytes to compare: 100% off, never engine-checked
        assert r.recipe.model.architecture.kv_lora_rank in (None, 0) or slug == "dsv3-perf-h200"
    else:
        assert record.get("geometry_from", "recipe") == "recipe"
    assert record["comparison"]["kv_bytes_per_token"]["plan"] > 0


def test_the_glm_bundle_was_re_planned_from_the_runs_own_files():
    r = resolve(ROOT / "recipes" / "glm52-fp8-8x-h200" / "recipe.yaml")
    record = json.loads((E.bundles(r)[-1] / E.RECORD).read_text())
    assert (
        record["rederived_from"]["run_date"] == "2026-12-05"
        and "only the plan's side" in record["rederived_from"]["note"]
    )
    # vLLM's side is what that run measured
    assert (record["vllm"]["available_kv_gib"], record["vllm"]["kv_tokens"]) == (51.07, 8353920)
    assert record["vllm"]["max_concurrency"] == 63.74


@pytest.mark.parametrize("slug", AWAITING_RERUN)
def test_a_recipe_whose_block_changed_stays_stale_until_re_run(slug, tmp_path):
    r = resolve(ROOT / "recipes" / slug / "recipe.yaml")
    word, reasons = E.status(r)
    assert word == E.STALE and reasons == [f"the recipe changed after the run ({E.bundles(r)[-1].name})"]
    record = json.loads((E.bundles(r)[-1] / E.RECORD).read_text())
    assert record["vllm"]["args"]["max_num_seqs"] != r.recipe.serve.args["max_num_seqs"].value
    # the old run cannot be re-planned into a new bundle: its launch block is not the recipe's any more
    d = tmp_path / "recipes" / slug
    d.mkdir(parents=True)
    shutil.copy(ROOT / "recipes" / slug / "recipe.yaml", d / "recipe.yaml")
    copy = resolve(d / "recipe.yaml")
    with pytest.raises(ValueError, match="is not the recipe's launch block"):
        E.write(E.bundles(r)[-1], copy, {})
    assert not (d / E.FOLDER).exists()


def test_the_broken_copy_run_on_the_h200_does_not_earn_it(tmp_path):
    log = (BROKEN / "server.log").read_text()
    assert "unrecognized arguments: --cookbook-not-a-vllm-flag 1" in log  # vLLM itself refused it
    d = tmp_path / "recipes" / "glm52-fp8-8x-h200"
    d.mkdir(parents=True)
    shutil.copy(ROOT / "recipes" / "glm52-fp8-8x-h200" / "recipe.yaml", d / "recipe.yaml")
    r = resolve(d / "recipe.yaml")
    with pytest.raises(ValueError) as e:
        E.write(BROKEN, r, {})
    # the recipe changed since (issue 68: max_num_seqs, plan.traffic), so its block's header hash differs too
    # and the refusal names the block mismatch instead of the one flag
    assert "never answered (refused 2)" in str(e.value)
    assert "--cookbook-not-a-vllm-flag 1" in str(e.value) or "not the recipe's launch block" in str(e.value)
    assert not (d / E.FOLDER).exists()  # nothing written


def test_the_cli_refuses_the_broken_h200_run_in_one_message():
    before = sorted((ROOT / "recipes" / "glm52-fp8-8x-h200" / E.FOLDER).iterdir())
    res = CliRunner().invoke(main, ["maint", "engine-check", "write", "glm52-fp8-8x-h200", str(BROKEN)])
    assert res.exit_code == 1 and "does not earn engine-checked" in res.output and "Traceback" not in res.output
    assert sorted((ROOT / "recipes" / "glm52-fp8-8x-h200" / E.FOLDER).iterdir()) == before
