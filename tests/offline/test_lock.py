"""The committed offline lock (issue 46, item 4): `cookbook offline pack` carries what
recipes/<slug>/offline.lock pins, each file checked by pip's hash-checking mode, and the lock names no
path or URL of any machine. The H200 lock reproduces the wheels its verified bundle ran."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from offline_payload import wheel

from cookbook.errors import CookbookError
from cookbook.evidence.status import bundle_path
from cookbook.files import repo_root
from cookbook.offline import lock, pack
from cookbook.recipe.resolve import resolve

RECIPES = repo_root() / "recipes"
OFFLINE = sorted(p.parent.name for p in RECIPES.glob("*/offline.yaml"))


@pytest.mark.parametrize("slug", OFFLINE)
def test_every_offline_recipe_commits_a_lock_that_names_no_machine_path(slug):
    text = (RECIPES / slug / lock.LOCK_NAME).read_text()
    pins = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert not [ln for ln in pins if "/" in ln or "@" in ln or "file:" in ln or "\\" in ln]
    got = lock.parse(text, slug)
    engine = resolve(slug).recipe.image.engine
    assert (got.engine.name, got.engine.version) == (engine.package, engine.version)
    spec = pack.OfflineSpec.load(RECIPES / slug / "offline.yaml")
    by_name = {pack.normalize(p.name): p.version for p in got.wheels}
    for req in [*spec.extra, *spec.constraints]:
        if m := re.fullmatch(r"\s*([A-Za-z0-9._-]+)==([^\s#;]+).*", req):
            assert by_name.get(pack.normalize(m[1])) == m[2], f"{slug}: the lock does not carry {req}"
    assert not set(by_name) & (spec.host_packages - {pack.normalize(r.split("=")[0]) for r in spec.extra})


def test_the_h200_lock_carries_the_wheels_its_verified_bundle_ran():
    # the bundle the recipe's own verified block names, not whatever else sits in evidence/ (the
    # engine-check bundle sits there too)
    bundle = bundle_path(resolve("gemma3-270m-h200").recipe.verified.bundle)
    assert bundle.parent == RECIPES / "gemma3-270m-h200" / "evidence", bundle
    ran = pack.carried_by(bundle / "environment.lock")
    assert len(ran) > 50
    got = {pack.normalize(p.name): (p.version, p.sha256) for p in lock.load(RECIPES / "gemma3-270m-h200").wheels}
    for name, (version, sha) in ran.items():
        assert got[name] == (version, (sha,)), name


@pytest.mark.parametrize(
    "line",
    [
        "transformers @ file:///work/main/.carry/extra-wheels/transformers-5.19.0-py3-none-any.whl#sha256=" + "a" * 64,
        "transformers==5.19.0",  # no hash: pip would take any file
        "transformers==5.19.0 --hash=sha256:abc",
        "/tmp/x.whl --hash=sha256:" + "a" * 64,
        "x==1 --hash=sha256:" + "a" * 64 + " --index-url http://evil",
        "x==1 --hash=sha256:" + "a" * 64 + "\nx==2 --hash=sha256:" + "b" * 64,
    ],
)
def test_a_lock_line_that_is_not_a_hashed_pin_is_refused(line):
    with pytest.raises(CookbookError):
        lock.parse("vllm==0.26.0 --hash=sha256:" + "c" * 64 + "\n" + line + "\n", "offline.lock")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_whatever_parses_is_only_names_versions_and_hashes(text):
    try:
        got = lock.parse(text, "offline.lock")
    except CookbookError:
        return
    for p in (got.engine, *got.wheels):
        assert "/" not in p.name + p.version and "@" not in p.name + p.version and ":" not in p.version


def _spec():
    return pack.OfflineSpec(
        python="3.11", platforms=["any"], host="test", host_packages=set(), engine_drop={}, skip={}, no_deps={}
    )


def test_pack_downloads_locked_wheels_in_hash_checking_mode(tmp_path, monkeypatch):
    """Real pip, offline: the index is a local folder (PIP_NO_INDEX, PIP_FIND_LINKS)."""
    index = tmp_path / "index"
    index.mkdir()
    whl = wheel(index)
    sha = pack._file_sha256(whl)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    good = (lock.Pin("tinydep", "1.0", (sha,)),)
    got = pack.download_wheels([("tinydep", "1.0")], _spec(), tmp_path / "cache", good)
    assert [w.name for w in got] == [whl.name]
    bad = (lock.Pin("tinydep", "1.0", ("0" * 64,)),)
    with pytest.raises(CookbookError, match="pip could not download the locked wheels"):
        pack.download_wheels([("tinydep", "1.0")], _spec(), tmp_path / "cache2", bad)
    # a file already in the cache with another sha256 is refused too, not carried
    with pytest.raises(CookbookError, match="is not the one offline.lock names"):
        pack._check_locked(got, bad)


def test_carried_by_reads_versions_and_hashes_never_paths(tmp_path):
    env = tmp_path / "environment.lock"
    env.write_text(
        "numpy==2.0.0\nloguru @ file:///work/main/.carry/loguru/loguru-0.7.3-py3-none-any.whl#sha256=" + "d" * 64 + "\n"
    )
    assert pack.carried_by(env) == {"loguru": ("0.7.3", "d" * 64)}
    assert json.dumps(pack.carried_by(env)).count("/") == 0
