"""Issue 48.5: a genuine bundle relabelled for an edited recipe. The forger replaces
recipe.resolved.json with the edited recipe's, sets results.json's recipe_hash and rewrites the
manifest; the measurements stay genuine. What the server reported of itself (models.json,
metrics-before.prom's vllm:cache_config_info and spec-decode positions, version.json) binds the
bundle to the configuration it measured, so an edit of a reported setting is refused. Settings
the server does not report (max_num_seqs) cannot be told apart: the last test pins that limit,
which gates/VERIFIED.md states."""

import json

import evidence_bundles
import pytest
import yaml

from cookbook.evidence.recheck import recheck
from cookbook.gates.bundle import write_manifest
from cookbook.recipe import resolve


def relabel(bundle, edit) -> list[str]:
    """Edit the recipe copy, then relabel the genuine bundle for it as a forger would; the reasons."""
    r = resolve(evidence_bundles.SLUG)
    data = yaml.safe_load(r.path.read_text())
    edit(data["serve"]["args"])
    r.path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = resolve(evidence_bundles.SLUG)
    (bundle / "recipe.resolved.json").write_text(json.dumps(r.recorded, indent=2, default=str) + "\n")
    evidence_bundles.edit_results(bundle, lambda doc: doc.update(recipe_hash=r.content_hash))
    write_manifest(bundle)
    return recheck(r, bundle)


@pytest.fixture
def genuine(tmp_path, monkeypatch):
    return evidence_bundles.genuine_bundle(tmp_path, monkeypatch)


def test_the_genuine_bundle_is_bound_to_its_recipe(genuine):
    assert recheck(resolve(evidence_bundles.SLUG), genuine) == []


@pytest.mark.parametrize(
    "edit,why",
    [
        (lambda a: a.update(max_model_len={"value": 8192}), "served max_model_len 10240 (/v1/models)"),
        (lambda a: a.update(block_size=64), "block_size=128"),
        (lambda a: a.update(gpu_memory_utilization=0.5), "gpu_memory_utilization=0.92"),
        (lambda a: a.update(enable_prefix_caching=False), "enable_prefix_caching=True"),
        (lambda a: a["speculative_config"]["value"].update(num_speculative_tokens=5), "drafted 3 tokens a step"),
        (lambda a: a.update(speculative_config={"value": None}), "the recipe runs no speculation"),
    ],
)
def test_a_relabelled_bundle_is_refused_when_a_reported_setting_was_edited(genuine, edit, why):
    reasons = relabel(genuine, edit)
    assert any(why in r for r in reasons), reasons
    # only the binding catches it: the relabelling itself is consistent
    assert not any("recipe.resolved.json hashes to" in r or "manifest" in r for r in reasons), reasons


def test_a_bundle_without_what_the_server_reported_is_refused(genuine):
    (genuine / "metrics-before.prom").unlink()
    write_manifest(genuine)
    reasons = recheck(resolve(evidence_bundles.SLUG), genuine)
    assert any("cannot be bound to the recipe" in r for r in reasons), reasons


def test_a_setting_the_server_does_not_report_is_not_detected(genuine):
    """The documented limit: max_num_seqs 16 -> 1024 is not in anything vLLM reports."""
    assert relabel(genuine, lambda a: a.update(max_num_seqs={"value": 1024})) == []


def test_a_results_claim_of_the_server_that_its_files_do_not_bear_is_refused(genuine):
    evidence_bundles.edit_results(genuine, lambda doc: doc.update(server_reported={"max_model_len": 8192}))
    write_manifest(genuine)
    reasons = recheck(resolve(evidence_bundles.SLUG), genuine)
    assert any("server_reported differs" in r for r in reasons), reasons


# ---- issue 64, items 6 and 7 ----------------------------------------------------------------------


def relabel_recipe(bundle, edit) -> list[str]:
    """As relabel(), for an edit anywhere in the recipe (not only serve.args)."""
    r = resolve(evidence_bundles.SLUG, check=False)
    data = yaml.safe_load(r.path.read_text())
    edit(data)
    r.path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = resolve(evidence_bundles.SLUG, check=False)
    (bundle / "recipe.resolved.json").write_text(json.dumps(r.recorded, indent=2, default=str) + "\n")
    evidence_bundles.edit_results(bundle, lambda doc: doc.update(recipe_hash=r.content_hash))
    write_manifest(bundle)
    return recheck(r, bundle)


@pytest.mark.parametrize("pin", ["0.3", "0", "0.32.0.1", "0.32.1", "0.32.0rc1"])
def test_a_bundle_relabelled_for_another_engine_pin_is_refused(genuine, pin):
    reasons = relabel_recipe(genuine, lambda d: d["image"]["engine"].update(version=pin))
    assert any(f"the server reports vLLM 0.32.0 (/version), the recipe pins {pin}" in r for r in reasons), reasons


def test_the_engine_version_is_compared_as_a_release():
    from cookbook.versions import same_release

    assert (
        same_release("0.32.0", "0.32.0") and same_release("0.32.0", "0.32") and same_release("0.26.0+cu129", "0.26.0")
    )
    for reported, pinned in [
        ("0.32.0", "0.3"),
        ("0.32.0", "0"),
        ("0.32.0", ""),
        ("x", "0.32.0"),
        ("0.32.0", "0.32.0.post1"),
    ]:
        assert not same_release(reported, pinned), (reported, pinned)


@pytest.mark.parametrize(
    "edit,why",
    [
        (lambda a: a.update(prefix_caching_hash_algo="xxhash"), "prefix_caching_hash_algo=sha256"),
        (lambda a: a.update(num_gpu_blocks_override=64), "num_gpu_blocks_override=None"),
        (lambda a: a.update(kv_sharing_fast_prefill=True), "kv_sharing_fast_prefill=False"),
    ],
)
def test_every_flag_the_server_reports_is_compared(genuine, edit, why):
    reasons = relabel(genuine, edit)
    assert any(why in r for r in reasons), reasons


@pytest.mark.parametrize(
    "edit",
    [lambda a: a.update(dtype={"value": "float32"}), lambda a: a.update(tool_call_parser={"value": "mistral"})],
    ids=["dtype", "tool_call_parser"],
)
def test_settings_the_server_cannot_report_are_the_listed_limit(genuine, edit):
    assert relabel(genuine, edit) == []  # the documented limit: vLLM reports neither


@pytest.mark.parametrize("slug", ["gemma3-270m-cpu", "gemma3-270m-cpu-avx2", "gemma3-270m-h200"])
def test_every_serve_flag_of_a_verified_recipe_is_compared_or_listed_as_unreported(slug):
    from pathlib import Path

    from cookbook.evidence.server_config import reported_flags
    from cookbook.gates.server_reported import cache_labels

    repo = Path(__file__).resolve().parents[2]
    labels = cache_labels(repo / "recipes" / "gemma3-270m-cpu" / "evidence" / evidence_bundles.RUN)
    compared = set(reported_flags(labels)) | {"max_model_len", "speculative_config", "served_model_name"}
    readme = (repo / "gates" / "VERIFIED.md").read_text()
    limits = readme[readme.index("**What still cannot be detected**") :]
    r = resolve(slug, check=False)
    for key, setting in r.recipe.serve.args.items():
        if setting is not None and setting.value is not None and key not in compared:
            assert f"`{key}`" in limits, f"{slug}: serve.args.{key} is neither compared nor listed in gates/VERIFIED.md"
