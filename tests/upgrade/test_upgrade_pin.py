"""The new pin as text: the CPU recipe with its pin moved (nothing else), and the new fix profile."""

from __future__ import annotations

import difflib
import shutil

import pytest

from cookbook.errors import CookbookError
from cookbook.fixes import pack
from cookbook.recipe.resolve import resolve
from cookbook.upgrade import pin
from cookbook.upgrade.fixstatus import ABSORBED, APPLIES, CONFLICTS, NO_LONGER_REPRODUCES, FixStatus

SLUG = "gemma3-270m-cpu"


def test_the_recipe_changes_only_in_its_engine_version_and_profile():
    resolved = resolve(SLUG)
    edits = pin.recipe_edits(resolved, "0.31.0", "vllm-cpu-0.31.0")
    assert list(edits) == [resolved.path]  # one file holds the pin
    old = resolved.path.read_text()
    new = pin.set_scalars(old, edits[resolved.path], resolved.path)
    changed = [
        ln for ln in difflib.unified_diff(old.splitlines(), new.splitlines(), n=0, lineterm="") if ln[:1] in "+-"
    ]
    assert sorted(changed) == [
        "+    profile: vllm-cpu-0.31.0",
        '+    version: "0.31.0"',
        "+++ ",
        "-    profile: vllm-cpu-0.32.0",
        '-    version: "0.32.0"',
        "--- ",
    ]


def test_a_recipe_without_the_key_is_refused(tmp_path):
    with pytest.raises(CookbookError, match=r"no scalar image.engine.version to move"):
        pin.set_scalars("image:\n  fixes: {profile: x}\n", {"image.engine.version": "1"}, tmp_path / "r.yaml")


def test_the_new_profile_keeps_what_applies_and_says_why_each_other_was_dropped(tmp_path, monkeypatch):
    old = pack.load_profile("vllm-cpu-0.32.0")
    statuses = [
        FixStatus("vllm-cpu-cli-version", APPLIES, "applies exactly"),
        FixStatus("logprobs-decode-guard", ABSORBED, "already applied upstream: x already hold(s) its change"),
        FixStatus("aot-cache-load", NO_LONGER_REPRODUCES, "applies, but t passes on the unpatched engine"),
        FixStatus("cpu-spec-sampling-expand", APPLIES, "applies exactly"),
        FixStatus("vllm-cpu-optional-deps-lookup", APPLIES, "applies exactly"),
        FixStatus("cpu-top-p-candidates", APPLIES, "applies exactly"),
        FixStatus("spec-recovered-noise", APPLIES, "applies exactly"),
        FixStatus("spec-no-draft-sampling", APPLIES, "applies exactly"),
    ]
    text = pin.profile_text(old, statuses, "0.33.0", "2.14.0+cpu", "cookbook upgrade x --engine 0.33.0", "r/")
    assert "  # dropped logprobs-decode-guard: absorbed: already applied upstream" in text
    assert "  # dropped aot-cache-load: no-longer-reproduces: applies, but t passes" in text
    fixes = tmp_path / "fixes"
    shutil.copytree(pack.pack_dir(), fixes)
    (fixes / "profiles" / "vllm-cpu-0.33.0.yaml").write_text(text)
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(fixes))
    new = pack.load_profile("vllm-cpu-0.33.0")
    assert (new.distribution, new.version) == ("vllm-cpu", "0.33.0")
    assert [f.name for f in new.fixes] == [
        "vllm-cpu-cli-version",
        "cpu-spec-sampling-expand",
        "vllm-cpu-optional-deps-lookup",
        "cpu-top-p-candidates",
        "spec-recovered-noise",
        "spec-no-draft-sampling",
    ]


def test_a_profile_with_every_fix_dropped_is_still_a_profile(tmp_path, monkeypatch):
    old = pack.load_profile("vllm-cpu-0.32.0")
    statuses = [FixStatus(f.name, CONFLICTS if i else ABSORBED, "e") for i, f in enumerate(old.fixes)]
    text = pin.profile_text(old, statuses, "0.33.0", "2.14.0+cpu", "c", "r/")
    fixes = tmp_path / "fixes"
    shutil.copytree(pack.pack_dir(), fixes)
    (fixes / "profiles" / "vllm-cpu-0.33.0.yaml").write_text(text)
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(fixes))
    assert pack.load_profile("vllm-cpu-0.33.0").fixes == ()
