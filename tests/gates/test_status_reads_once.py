"""One status check reads a bundle's results.json once and checks (hashes) its manifest once, and
`cookbook show` resolves the recipe once (twice with --quant or --set): counted on the real verified
CPU recipe and its committed bundle, copied so the passed-re-check cache starts empty."""

import collections
import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.gates import bundle

REPO = Path(__file__).resolve().parents[2]
SLUG = "gemma3-270m-cpu-avx2"  # verified, by its committed bundle


@pytest.fixture
def verified_copy(tmp_path, monkeypatch):
    """tmp recipes/ with the verified recipe (and the base it extends); .cache/ under tmp, so empty.
    When the recipe has changed since its gates ran (stale), the copy's bundle is bound to the recipe
    as it is now (recipe.resolved.json, the hashes, the manifest), as `gates run` would have written it,
    so the count is of the full re-check whatever the recipe's status in the checkout."""
    for slug in (SLUG, "gemma3-270m-cpu"):
        shutil.copytree(REPO / "recipes" / slug, tmp_path / "recipes" / slug)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    monkeypatch.setenv("COOKBOOK_ROOT", str(tmp_path))
    _bind_to_the_recipe_now(next((tmp_path / "recipes" / SLUG / "evidence").iterdir()))
    return tmp_path / "recipes" / SLUG


def _bind_to_the_recipe_now(found: Path) -> None:
    from cookbook.recipe.resolve import resolve

    resolved = resolve(SLUG, check=False)
    doc = json.loads((found / "results.json").read_text())
    old, new = doc["recipe_hash"], resolved.content_hash
    if old == new:
        return
    (found / "recipe.resolved.json").write_text(json.dumps(resolved.recorded, indent=2, default=str) + "\n")
    (found / "results.json").write_text(json.dumps({**doc, "recipe_hash": new}, indent=2))
    resolved.path.write_text(resolved.path.read_text().replace(old, new))
    bundle.write_manifest(found)


@pytest.fixture
def counts(monkeypatch):
    """(parsed, hashed): file name -> Path.read_bytes/read_text calls (how JSON is read), and path ->
    sha256_file calls (how the manifest check hashes a file), wherever the function was imported."""
    parsed: collections.Counter = collections.Counter()
    hashed: collections.Counter = collections.Counter()
    read_bytes, read_text, sha256_file = Path.read_bytes, Path.read_text, bundle.sha256_file

    def rb(self, *a, **k):
        parsed[self.name] += 1
        return read_bytes(self, *a, **k)

    def rt(self, *a, **k):
        parsed[self.name] += 1
        return read_text(self, *a, **k)

    def sha(path):
        hashed[Path(path).resolve()] += 1
        return sha256_file(path)

    monkeypatch.setattr(Path, "read_bytes", rb)
    monkeypatch.setattr(Path, "read_text", rt)
    for name, module in list(sys.modules.items()):
        if name.startswith("cookbook") and getattr(module, "sha256_file", None) is sha256_file:
            monkeypatch.setattr(module, "sha256_file", sha)
    return parsed, hashed


def test_one_status_check_reads_results_json_once_and_hashes_the_manifest_once(verified_copy, counts):
    from cookbook.evidence.status import status_and_reasons
    from cookbook.recipe.resolve import resolve

    parsed, hashed = counts
    resolved = resolve(SLUG, check=False)
    found = next((verified_copy / "evidence").iterdir()).resolve()
    # every listed file hashed once by the manifest check; environment.lock once more, cold, by the
    # environment check (its sha256 against results.json's record, which the manifest does not pin)
    files = [p for p in found.rglob("*") if p.is_file() and p.name not in ("manifest.json", "environment.lock")]
    for attempt in ("cold: the full re-check", "warm: the remembered pass"):
        parsed.clear()
        hashed.clear()
        assert status_and_reasons(resolved) == ("verified", []), attempt
        assert parsed["results.json"] == 1, (attempt, parsed)
        # manifest.json read once: checked, and its own sha256 (the passed cache's key) from those bytes
        assert parsed["manifest.json"] + hashed[found / "manifest.json"] == 1, (attempt, parsed, hashed)
        assert all(hashed[p] == 1 for p in files), (attempt, {p.name: hashed[p] for p in files})


@pytest.mark.parametrize(
    "slug,extra,times",
    [
        (SLUG, [], 1),
        (SLUG, ["--set", "max_num_seqs=4"], 2),
        ("dsv4-2", [], 1),  # unverified, no engine-check bundle
        ("dsv4-2", ["--quant", "Q4K-tail"], 2),
    ],
    ids=["verified", "verified-set", "unverified", "unverified-quant"],
)
def test_show_resolves_the_recipe_once_or_twice_with_quant_or_set(request, monkeypatch, slug, extra, times):
    if slug == SLUG:
        request.getfixturevalue("verified_copy")  # verified, whatever the checkout's status
    R = importlib.import_module("cookbook.recipe.resolve")  # the package re-exports the function

    calls = []
    load_chain = R.load_chain

    def counting(slug):
        calls.append(slug)
        return load_chain(slug)

    monkeypatch.setattr(R, "load_chain", counting)  # every resolve() starts here
    r = CliRunner().invoke(main, ["show", slug, *extra])
    assert r.exit_code == 0, r.output
    if slug == SLUG:
        assert "status   verified" in r.output or "the recipe as written is verified" in r.output, r.output
    assert len(calls) == times, calls
