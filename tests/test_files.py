"""cookbook.files: atomic writes leave either the old file or the new one, never a part or a temp file."""

import os

import pytest

from cookbook import files


def test_atomic_write_replaces_and_keeps_the_mode(tmp_path):
    f = tmp_path / "sub" / "out.txt"
    files.atomic_write(f, "one\n")
    f.chmod(0o751)
    files.atomic_write(f, b"two\n")
    assert f.read_bytes() == b"two\n"
    assert f.stat().st_mode & 0o777 == 0o751
    assert sorted(p.name for p in f.parent.iterdir()) == ["out.txt"]


def test_atomic_write_failure_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    f = tmp_path / "out.txt"
    f.write_text("old\n")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="No space"):
        files.atomic_write(f, "new\n")
    assert f.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_atomic_file_failure_inside_the_block_writes_nothing(tmp_path):
    f = tmp_path / "model.gguf"
    with pytest.raises(RuntimeError):
        with files.atomic_file(f) as tmp:
            tmp.write_bytes(b"half a file")
            raise RuntimeError("the converter failed midway")
    assert list(tmp_path.iterdir()) == []


def test_atomic_file_refuses_an_existing_output_unless_overwrite(tmp_path):
    f = tmp_path / "x"
    f.write_text("keep")
    with pytest.raises(FileExistsError):
        with files.atomic_file(f):
            pass
    assert f.read_text() == "keep"


def test_atomic_dir_failure_keeps_the_old_dir(tmp_path):
    d = tmp_path / "hf"
    d.mkdir()
    (d / "old.json").write_text("{}")
    with pytest.raises(RuntimeError):
        with files.atomic_dir(d, force=True) as tmp:
            (tmp / "new.json").write_text("{}")
            raise RuntimeError("boom")
    assert [p.name for p in tmp_path.iterdir()] == ["hf"]
    assert [p.name for p in d.iterdir()] == ["old.json"]


def test_repo_root_is_the_checkout_or_cookbook_root(tmp_path, monkeypatch):
    monkeypatch.delenv("COOKBOOK_ROOT", raising=False)
    root = files.repo_root()
    assert (root / "recipes").is_dir() and (root / "pyproject.toml").is_file()
    monkeypatch.setenv("COOKBOOK_ROOT", str(tmp_path))
    assert files.repo_root() == tmp_path.resolve()
    from cookbook import engine
    from cookbook.recipe import paths

    assert paths.repo_root is files.repo_root and engine.repo_root is files.repo_root
