"""Verified needs a complete run: an empty suite is refused, a bundle must hold exactly the declared
gates and lie inside the checkout, a recipe must declare a gate unless it is a benchmark only."""

import json
import re
import shutil

import yaml
from click.testing import CliRunner
from test_verify import make_bundle

from cookbook.cli import main
from cookbook.evidence import verify
from cookbook.evidence.status import status_of
from cookbook.recipe import resolve
from cookbook.recipe.lint import lint_file


def _strip_gates(path, extra: dict | None = None):
    data = yaml.safe_load(path.read_text())
    data["gates"] = extra or {}
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_gates_run_refuses_a_recipe_with_nothing_to_run(recipes_dir, tmp_path):
    _strip_gates(recipes_dir / "gates-cpu" / "recipe.yaml")
    out = tmp_path / "b"
    res = CliRunner().invoke(main, ["gates", "run", "gates-cpu", "--base-url", "http://127.0.0.1:9", "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "declares no gates, so there is nothing to run" in res.output and "Traceback" not in res.output
    assert res.output.count("error:") == 1
    assert not out.exists()  # no empty bundle written


def test_lint_fails_a_recipe_stripped_of_its_gates(recipes_dir):
    path = recipes_dir / "gates-cpu" / "recipe.yaml"
    assert "R023" not in [d.kind.id for d in lint_file(path)]
    _strip_gates(path)
    assert [d.kind.id for d in lint_file(path)] == ["R023"]


def test_every_shipped_recipe_declares_a_gate_or_is_a_benchmark():
    """`cookbook show --json` lists gates for every recipe; the benchmark-only ones say so."""
    from cookbook.recipe import paths

    seen = 0
    for f in sorted(paths.recipes_dir().glob("*/recipe.yaml")):
        data = yaml.safe_load(f.read_text())
        if data.get("abstract"):
            continue
        res = CliRunner().invoke(main, ["show", f.parent.name, "--json"])
        assert res.exit_code == 0, res.output
        gates = json.loads(res.output)["recipe"]["gates"]
        named = [k for k in gates if k not in ("benchmark_only",)]
        assert named, f.parent.name
        seen += 1
    assert seen >= 17


def test_benchmark_only_recipe_is_shown_as_benchmark_and_never_verified(recipes_dir, tmp_path, monkeypatch):
    path = recipes_dir / "gates-cpu" / "recipe.yaml"
    text = path.read_text().replace(
        '  calibrated_on: "uncalibrated (test fixture)"',
        '  benchmark_only: "dummy weights (test)"\n  calibrated_on: "uncalibrated (test fixture)"',
    )
    path.write_text(text)
    monkeypatch.setenv("COOKBOOK_ROOT", str(tmp_path))
    r = resolve("gates-cpu")
    assert status_of(r) == "benchmark"
    reasons, block = verify.verify(r, make_bundle(tmp_path / "b", r))
    assert block is None and any("benchmark only" in x for x in reasons), reasons
    # and lint refuses a verified block on it
    path.write_text(text + "verified:\n  date: '2026-12-01'\n  recipe_hash: sha256:00\n  bundle: b\n")
    assert "R024" in [d.kind.id for d in lint_file(path)]


def test_verify_refuses_undeclared_gates_and_writes_only_declared(recipes_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("COOKBOOK_ROOT", str(tmp_path))
    r = resolve("gates-cpu")
    bundle = make_bundle(tmp_path / "b", r)
    doc = json.loads((bundle / "results.json").read_text())
    doc["gates"]["vision"] = {"name": "vision", "status": "passed", "reason": "", "measured": {}, "items": []}
    (bundle / "results.json").write_text(json.dumps(doc))
    reasons, block = verify.verify(r, bundle)
    assert block is None and any("does not declare: vision" in x for x in reasons), reasons


def test_verify_refuses_a_bundle_outside_the_checkout(recipes_dir, tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.setenv("COOKBOOK_ROOT", str(checkout))
    r = resolve("gates-cpu")
    before = r.path.read_text()
    outside = make_bundle(tmp_path / "elsewhere" / "b", r)
    reasons, block = verify.verify(r, outside)
    assert block is None and "lies outside the repository" in reasons[0]
    assert r.path.read_text() == before
    # a symlink inside the checkout that points outside is still outside
    (checkout / "runs").mkdir()
    (checkout / "runs" / "b").symlink_to(outside)
    reasons, _ = verify.verify(r, checkout / "runs" / "b")
    assert "lies outside the repository" in reasons[0]


def test_block_names_the_bundle_relative_to_the_checkout(tmp_path, monkeypatch):
    """From the real CPU bundle: the block's bundle is a repo-relative, '/'-separated path."""
    import evidence_bundles

    bundle = evidence_bundles.genuine_bundle(tmp_path, monkeypatch)
    r = resolve("gemma3-270m-cpu")
    r.path.write_text(r.path.read_text()[: r.path.read_text().index("# written by `cookbook gates verify`")])
    r = resolve("gemma3-270m-cpu")
    reasons, block = verify.verify(r, bundle)
    assert reasons == [], reasons
    assert block["bundle"] == "recipes/gemma3-270m-cpu/evidence/" + bundle.name
    assert not block["bundle"].startswith("/") and not re.search(r"\.\.", block["bundle"])
    assert list(block["gates"]) == r.recipe.gates.declared()
    shutil.rmtree(bundle)
