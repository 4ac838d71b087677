"""`cookbook offline pack --out DIR` never replaces a folder it did not fill (issue 48, item 7): an
absent or empty folder, or one holding only an earlier pack's pieces.json and piece-NN files, is
used; anything else is refused before the first download, unless --force."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cookbook.errors import CookbookError
from cookbook.offline.pack import check_out


def _pack(*args):
    return subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "maint", "offline", "pack", "gemma3-270m-h200", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_folder_an_earlier_pack_filled_is_replaced_silently(tmp_path):
    check_out(tmp_path / "absent", force=False)
    (tmp_path / "empty").mkdir()
    check_out(tmp_path / "empty", force=False)
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    _earlier_pack(earlier)
    check_out(earlier, force=False)


def _earlier_pack(out):
    """pieces.json and piece-NN files as pack writes them (names and sizes in the index)."""
    pieces = [{"name": f"piece-0{i}", "offset": 0, "size": i, "sha256": "0" * 64} for i in (1, 2)]
    for p in pieces:
        (out / p["name"]).write_bytes(b"x" * p["size"])
    (out / "pieces.json").write_text(json.dumps({"sha256": "0" * 64, "size": 3, "pieces": pieces}))


@pytest.mark.parametrize(
    "make,what",
    [
        (lambda o: (o / "piece-01").mkdir(), "piece-01"),  # the user's folder, named like a piece
        (lambda o: (o / "pieces.json").mkdir(), "pieces.json"),  # a folder named like the index
        (lambda o: (o / "piece-03").write_text("mine"), "piece-03"),  # a file the index does not list
        (lambda o: (o / "piece-02").write_text("edited, longer"), "piece-02"),  # not the size recorded
        (lambda o: (o / "pieces.json").write_text("my notes"), "pieces.json"),  # not a pack index
    ],
    ids=["piece folder", "index folder", "unlisted piece", "resized piece", "not an index"],
)
def test_names_alone_do_not_make_a_folder_an_earlier_pack(tmp_path, make, what):
    """Issue 64, item 2: judged by content, not names."""
    out = tmp_path / "out"
    out.mkdir()
    _earlier_pack(out)
    if what in ("piece-01", "pieces.json"):
        (out / what).unlink()  # replaced by the user's own
    make(out)
    with pytest.raises(CookbookError, match=f"did not write \\([^)]*{what}"):
        check_out(out, force=False)
    assert (out / what).exists()


@pytest.mark.parametrize("foreign", ["thesis.tex", ".git", "piece-01.bak", "sub"])
def test_a_folder_holding_other_files_is_refused_before_any_download(tmp_path, foreign):
    out = tmp_path / "out"
    out.mkdir()
    (out / "pieces.json").write_text('{"pieces": []}')
    target = out / foreign
    target.mkdir() if foreign in (".git", "sub") else target.write_text("mine")
    done = _pack("--out", out, "--piece-mib", "8")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"holds files an earlier pack did not write ({foreign})" in done.stderr
    assert "--force" in done.stderr and "Traceback" not in done.stderr
    assert "download" not in done.stderr  # refused before pip was asked anything
    assert target.exists()
    check_out(out, force=True)  # --force takes it


@pytest.mark.parametrize("kind", ["file", "link", "proc"])
def test_an_out_that_is_not_a_folder_is_refused(tmp_path, kind):
    if kind == "file":
        out = tmp_path / "f"
        out.write_text("keep")
    elif kind == "link":
        (tmp_path / "real").mkdir()
        out = tmp_path / "l"
        os.symlink(tmp_path / "real", out)
    else:
        out = "/proc/self"
    with pytest.raises(CookbookError, match="--out"):
        check_out(type(tmp_path)(out), force=True)
    done = _pack("--out", out, "--piece-mib", "8")
    assert done.returncode == 2 and done.stderr.startswith("error: --out ") and "Traceback" not in done.stderr
