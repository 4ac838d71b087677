"""A model folder the user names is never emptied or replaced (issue 64 item 1): the cookbook writes
only into a folder it created (its .cookbook-model marker says so) or a new or empty one, through
cookbook.model_folder, and refuses anything else with the folder's name and a help line. Hostile
cases: a link, a marker that is a link or a FIFO, a folder of another user."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cookbook import model_folder
from cookbook.errors import CookbookError
from cookbook.model_folder import MARKER, FolderRefused

ROOT = Path(__file__).resolve().parents[1]


def users_folder(tmp_path: Path) -> Path:
    d = tmp_path / "d"
    d.mkdir()
    (d / "f").write_text("x")
    return d


def test_the_cpu_recipes_convert_step_keeps_a_users_folder(tmp_path, monkeypatch):
    """Regression: `CHECKPOINT_DIR=d cookbook serve gemma3-270m-cpu` ran `gguf-to-hf ... d --force`,
    which replaced d and deleted f. Now the step is refused before it runs, naming d."""
    from cookbook.recipe import resolve
    from cookbook.serving import local

    d = users_folder(tmp_path)
    monkeypatch.setenv("CHECKPOINT_DIR", str(d))
    monkeypatch.setattr(local, "fetch", lambda resolved: tmp_path / "m.gguf")
    with pytest.raises(FolderRefused) as exc:
        local.prepare(resolve("gemma3-270m-cpu"), tmp_path)
    assert str(d) in exc.value.format_message() and "did not write (f)" in exc.value.format_message()
    assert exc.value.help and "CHECKPOINT_DIR" in exc.value.help
    assert (d / "f").read_text() == "x" and sorted(p.name for p in d.iterdir()) == ["f"]


def test_gguf_to_hf_force_refuses_a_users_folder(tmp_path):
    """The converter itself (the recipe's step passes --force): refused, exit 2, the file kept."""
    d = users_folder(tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "convert", "gguf-to-hf", str(tmp_path / "none.gguf"), str(d), "--force"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert p.returncode == 2, p.stderr
    assert f"model folder {d}" in p.stderr and "help:" in p.stderr and "Traceback" not in p.stderr
    assert (d / "f").read_text() == "x"


@pytest.mark.parametrize("tool", ["quark", "dummy"])
def test_the_other_folder_converters_refuse_a_users_folder(tool, tmp_path):
    from cookbook.convert.dummy_checkpoint import make_dummy_checkpoint
    from cookbook.convert.quark_fuse import fuse_checkpoint

    d = users_folder(tmp_path)
    with pytest.raises(FolderRefused):
        if tool == "quark":
            fuse_checkpoint(tmp_path, d, force=True, progress=False)
        else:
            make_dummy_checkpoint(tmp_path / "t.gguf", tmp_path / "c.json", d, force=True)
    assert (d / "f").read_text() == "x"


def test_claim_creates_and_marks_a_new_folder_and_marks_an_empty_one(tmp_path):
    new = model_folder.claim(tmp_path / "a" / "b")
    assert (new / MARKER).is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    model_folder.claim(empty)
    assert (empty / MARKER).is_file()
    (empty / "weights.safetensors").write_bytes(b"\0")
    model_folder.claim(empty)  # marked: the cookbook's, its files and all


def test_replacing_only_replaces_a_marked_folder_and_marks_the_new_one(tmp_path):
    out = tmp_path / "out"
    with model_folder.replacing(out) as tmp:
        (tmp / "config.json").write_text("{}")
    assert (out / MARKER).is_file() and (out / "config.json").is_file()
    with pytest.raises(FileExistsError):  # ours, full: only with force
        with model_folder.replacing(out) as tmp:
            (tmp / "config.json").write_text("{}")
    with model_folder.replacing(out, force=True) as tmp:
        (tmp / "model.safetensors").write_bytes(b"\0")
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, "model.safetensors"])
    d = users_folder(tmp_path)
    with pytest.raises(FolderRefused):
        with model_folder.replacing(d, force=True) as tmp:
            pass
    assert (d / "f").read_text() == "x"


def test_a_linked_folder_is_refused_and_its_target_untouched(tmp_path):
    target = model_folder.claim(tmp_path / "ours")  # even a folder of the cookbook's, behind a link
    (target / "f").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(FolderRefused, match="is a link"):
        model_folder.claim(link)
    with pytest.raises(FolderRefused, match="is a link"):
        with model_folder.replacing(link, force=True):
            pass
    assert (target / "f").read_text() == "x" and link.is_symlink()


def test_a_marker_that_is_a_link_is_refused(tmp_path):
    d = users_folder(tmp_path)
    elsewhere = tmp_path / "marker-elsewhere"
    elsewhere.write_text("x")
    (d / MARKER).symlink_to(elsewhere)
    with pytest.raises(FolderRefused, match=f"holds {MARKER} as a link"):
        model_folder.claim(d)
    assert (d / "f").read_text() == "x"


def test_a_marker_that_is_a_fifo_is_refused_without_hanging(tmp_path):
    d = users_folder(tmp_path)
    os.mkfifo(d / MARKER)
    with pytest.raises(FolderRefused, match="not a regular file"):
        model_folder.claim(d)
    with pytest.raises(FolderRefused):
        with model_folder.replacing(d, force=True):
            pass
    assert (d / "f").read_text() == "x"


def test_a_path_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(FolderRefused, match="not a folder"):
        model_folder.claim(f)
    assert f.read_text() == "x"


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder of another user needs root")
def test_a_folder_of_another_user_in_tmp_is_refused(tmp_path):
    """As /tmp/models made by someone else: empty, but not this user's to mark or fill."""
    other = tmp_path / "theirs"
    other.mkdir(mode=0o777)
    os.chown(other, 65534, 65534)
    with pytest.raises(FolderRefused, match="owned by another user"):
        model_folder.claim(other)
    assert list(other.iterdir()) == []
    ours = model_folder.claim(tmp_path / "ours")
    os.chown(ours / MARKER, 65534, 65534)  # a marker another user planted
    with pytest.raises(FolderRefused, match="owned by another user"):
        model_folder.claim(ours)


def test_refusals_are_cookbook_errors_with_exit_2():
    assert issubclass(FolderRefused, CookbookError) and FolderRefused("x").exit_code == 2


def test_a_folder_or_entry_name_with_escapes_is_printed_escaped(tmp_path):
    d = tmp_path / "evil\x1b[31m"
    d.mkdir()
    (d / "f\u202e").write_text("x")
    with pytest.raises(FolderRefused) as exc:
        model_folder.claim(d)
    text = exc.value.format_message()
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b" in text
    assert sorted(p.name for p in d.iterdir()) == ["f\u202e"]
