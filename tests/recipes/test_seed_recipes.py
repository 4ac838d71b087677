"""The seed recipes as a set: listed (none runnable here, each with its reason), lint-clean,
every quant, rule and reported table carrying its source. The fact-by-fact audit against the three
documents is test_seed_facts.py; every quotation of a seed is checked by test_seed_quotations.py."""

import json
import os
import subprocess
import sys

import pytest
from seed_common import ROOT, SEED_BASES, SEED_RECIPES

from cookbook.recipe.lint import lint_file
from cookbook.recipe.paths import recipe_file
from cookbook.recipe.resolve import resolve


def cookbook(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "cookbook.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def test_list_shows_every_seed_recipe_none_runnable_here():
    # this machine has no accelerator; COOKBOOK_PLATFORM pins that for machines that do
    res = cookbook("list", "--json", env={"COOKBOOK_PLATFORM": "cpu:0"})
    assert res.returncode == 0, res.stderr
    rows = {r["slug"]: r for r in json.loads(res.stdout)["recipes"]}
    for slug in SEED_RECIPES:
        row = rows[slug]
        assert row["runs_here"] is False
        assert row["reason"].startswith("needs ") and "this machine has no accelerator" in row["reason"]
        assert row["status"] == "unverified"  # numbers from the documents are reported, never verified
    for base in SEED_BASES:
        assert base not in rows  # abstract bases are not listed


def test_list_reason_names_the_missing_hardware():
    res = cookbook("list", env={"COOKBOOK_PLATFORM": "mi300x:2"})
    lines = {line.split()[0]: line for line in res.stdout.splitlines()[1:] if line.strip()}
    assert "yes" in lines["glm52-2"].split("  ")[-1]
    assert "needs 4x AMD Instinct MI300X; this machine has only 2" in lines["glm52-4"]
    assert "needs 8x Intel Gaudi 2" in lines["glm52-mxfp4-8x-gaudi2"]


@pytest.mark.parametrize("slug", SEED_RECIPES + SEED_BASES)
def test_lint_clean(slug):
    from cookbook.recipe import errors as E

    diags = [d for d in lint_file(recipe_file(slug)) if d.kind.level == "error"]
    fix_profile_missing = [d for d in diags if d.kind is E.UNKNOWN_FIX and "v0.30.0" in d.problem]
    others = [d for d in diags if d not in fix_profile_missing]
    assert others == [], "\n".join(d.render() for d in others)
    if fix_profile_missing:
        pytest.skip(
            "the fix pack has no v0.30.0 profile yet (fixes/profiles/v0.30.0.yaml, issue 4): "
            + fix_profile_missing[0].problem
        )


def test_gaudi_fix_profile_names_the_documents_fixes():
    try:
        from cookbook.fixes import pack
    except ImportError:
        pytest.skip("cookbook.fixes.pack is not in this checkout (issue 4)")
    if "v0.30.0" not in pack.known_profiles():
        pytest.skip("the fix pack has no v0.30.0 profile yet (issue 4)")
    r = resolve("glm52-mxfp4-8x-gaudi2")
    infos = pack.resolve("v0.30.0", [f.name for f in r.recipe.image.fixes.opt_in])
    names = [f.name for f in infos]
    for name in (
        "structured-output-rows",
        "so-row-owners",
        "gather-logprobs-int32",
        "logprobs-decode-guard",
        "seeded-sampling",
        "rank-exception-fatal",
        "vllm-long-prefill-share",
        "glm47-streaming-text-markers",
    ):
        assert name in names


@pytest.mark.parametrize("slug", SEED_RECIPES)
def test_quants_rules_and_figures_carry_their_source(slug):
    r = resolve(slug).recipe
    for name, q in r.quants.items():
        assert q.size_gib and q.min_gpus >= 1 and q.use_when, f"{slug} quant {name}"
        if r.model.family != "k3":  # the K3 document gives no include pattern
            assert q.include, f"{slug} quant {name} has no include pattern"
    for rule in r.rules:
        assert rule.source and rule.message, f"{slug} rule {rule.id}"
    for rep in r.reported:
        assert rep.source
    assert r.verified is None  # only the gate tool writes verified
    # every setting says where it comes from (source), and why where the document says
    for where, settings in (("serve.args", r.serve.args), ("env", r.env)):
        for key, setting in settings.items():
            if setting.value is not None:
                assert setting.why or setting.source, f"{slug} {where}.{key} has neither why nor source"
    # the settings the documents explain at length always carry the explanation
    for key in ("reasoning_parser", "speculative_config", "attention_config", "gpu_memory_utilization"):
        s = r.serve.args.get(key)
        explained = key != "gpu_memory_utilization" or r.hardware.platform == "gaudi2"
        if s is not None and s.value is not None and explained:
            assert s.why, f"{slug} serve.args.{key} has no why"


def test_show_prints_reasons_and_reported_as_not_verified():
    res = cookbook("show", "glm52-mxfp4-8x-gaudi2")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "why: the DSA indexer-key buffers" in out
    assert "reported (not verified here)" in out and "0.858 over 1,651 drafts" in out
    assert "fused-mxfp4-loading [in the port image]" in out
    assert "kernel mxfp4-moe --variant glm" in out
    assert "tools/convert/quark-mxfp4-fuse" in out


def test_k3_convert_joins_parts_and_fixes_the_vision_flag():
    steps = resolve("k3-6").recipe.convert
    assert [s.tool for s in steps] == ["gguf-join", "gguf-set"]
    assert "kimi-k3.vision=true" in steps[1].args
    assert steps[0].args[-1] == steps[1].args[0] == resolve("k3-6").recipe.serve.model


def test_glm_quant_selects_its_merged_file():
    for q in ("IQ2_XXS", "Q2_K", "Q4_K", "Q6_K"):
        r = resolve("glm52-8", q).recipe
        assert r.serve.model.endswith(f"GLM-5.2-Vision-{q}.gguf")
        assert r.convert[0].tool == "gguf-join" and r.convert[0].args[-1] == r.serve.model
