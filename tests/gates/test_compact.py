"""cookbook gates compact: a committed bundle's transcripts gzipped, and the re-check unchanged by it."""

from __future__ import annotations

import gzip
import shutil

import pytest

from cookbook.evidence.manifest import check_manifest
from cookbook.evidence.recheck import recheck
from cookbook.evidence.status import bundle_path
from cookbook.gates import recorded
from cookbook.gates.bundle import compact, write_manifest
from cookbook.recipe.resolve import resolve

SLUG = "gemma3-270m-h200"


@pytest.fixture
def plain_bundle(tmp_path):
    """The committed (compacted) H200 bundle, with its transcripts un-gzipped: as a run writes it."""
    src = bundle_path(resolve(SLUG).recipe.verified.bundle)  # not the engine-check bundle beside it
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    for gz in (dst / "transcripts").glob("*.jsonl.gz"):
        gz.with_suffix("").write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()
    write_manifest(dst)
    return dst


# The committed bundle predates the recipe hash covering the chat template (issue 64, item 4): until
# the H200 runs the gates again, its one refusal is the hash; compaction must change nothing else.
NOW_STALE = "the recipe is now"


def test_compacted_bundle_rechecks_the_same(plain_bundle):
    resolved = resolve(SLUG)
    before = recheck(resolved, plain_bundle)
    assert all(NOW_STALE in r for r in before), before
    records = recorded.transcript(plain_bundle, "speed")
    sizes = compact(plain_bundle)
    assert {name for name, _, _ in sizes} >= {"transcripts/speed.jsonl", "transcripts/needles.jsonl"}
    speed = next(s for s in sizes if s[0] == "transcripts/speed.jsonl")
    assert speed[2] < speed[1] / 5  # streamed chunks compress well
    assert not list((plain_bundle / "transcripts").glob("*.jsonl"))
    assert check_manifest(plain_bundle) == []
    assert recorded.transcript(plain_bundle, "speed") == records
    assert recheck(resolved, plain_bundle) == before  # every gate recomputed from the .gz transcripts


def test_compaction_is_deterministic(plain_bundle, tmp_path):
    twin = tmp_path / "twin"
    shutil.copytree(plain_bundle, twin)
    compact(plain_bundle)
    compact(twin)
    assert (plain_bundle / "manifest.json").read_bytes() == (twin / "manifest.json").read_bytes()


def test_bad_gzip_and_gzip_bomb_are_refused(plain_bundle, monkeypatch):
    compact(plain_bundle)
    gz = plain_bundle / "transcripts" / "greedy.jsonl.gz"
    gz.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a gzip file"):
        recorded.transcript(plain_bundle, "greedy")
    gz.write_bytes(gzip.compress(b"{}\n" * 4000))
    monkeypatch.setattr(recorded, "MAX_FILE_BYTES", 1000)
    with pytest.raises(ValueError, match="holds over"):
        recorded.transcript(plain_bundle, "greedy")
