"""Class 3: a tool never deletes or overwrites what it did not create; multi-file outputs are atomic as a set."""

import resource
import signal

import pytest
from hostile_helpers import assert_clean_error, gguf_file, quark_dir, run_tool

from cookbook.convert import gguf_join
from cookbook.convert.gguf_join import split_gguf
from cookbook.convert.quark_fuse import fuse_checkpoint


def two_tensor_gguf(path, big: int = 1 << 16):
    """Tensor a is small, tensor b is big: shard 2 of a --max-tensors 1 split is much larger than shard 1."""
    return gguf_file(path, tensors=[("a.weight", (8,)), ("b.weight", (big,))])


def test_user_folders_named_like_temp_and_old_are_kept(tmp_path):
    src = quark_dir(tmp_path / "src")
    out = tmp_path / "out"
    for extra in ("out.tmp", "out.old"):
        (tmp_path / extra).mkdir()
        (tmp_path / extra / "mine.txt").write_text("keep me")
    fuse_checkpoint(src, out, progress=False)
    fuse_checkpoint(src, out, progress=False, force=True)  # replacing out: its old copy is ours to remove
    for extra in ("out.tmp", "out.old"):
        assert (tmp_path / extra / "mine.txt").read_text() == "keep me"
    assert (out / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.old", "out.tmp", "src"]


def test_split_refuses_to_overwrite_existing_shards_without_force(tmp_path):
    src = two_tensor_gguf(tmp_path / "m.gguf")
    other = tmp_path / "x-00002-of-00002.gguf"
    other.write_bytes(b"someone else's shard")
    r = run_tool("gguf-split", src, tmp_path / "x", "--max-tensors", "1")
    assert_clean_error(r, "x-00002-of-00002.gguf", "--force")
    assert other.read_bytes() == b"someone else's shard"
    assert not (tmp_path / "x-00001-of-00002.gguf").exists()
    r = run_tool("gguf-split", src, tmp_path / "x", "--max-tensors", "1", "--force")
    assert r.returncode == 0, r.stderr
    assert other.read_bytes() != b"someone else's shard"


def test_raw_split_refuses_to_overwrite_existing_parts_without_force(tmp_path):
    src = two_tensor_gguf(tmp_path / "m.gguf")
    (tmp_path / "m.gguf.part01").write_text("mine")
    r = run_tool("gguf-split", src, tmp_path, "--raw-parts", "2")
    assert_clean_error(r, "m.gguf.part01")
    assert (tmp_path / "m.gguf.part01").read_text() == "mine"
    assert not (tmp_path / "m.gguf.part00").exists()


def test_split_never_rewrites_its_own_input(tmp_path):
    src = two_tensor_gguf(tmp_path / "x-00001-of-00002.gguf")
    before = src.read_bytes()
    r = run_tool("gguf-split", src, tmp_path / "x", "--max-tensors", "1", "--force")
    assert_clean_error(r, "input")
    assert src.read_bytes() == before
    assert not (tmp_path / "x-00002-of-00002.gguf").exists()


def _limit_file_size(n):
    def f():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))

    return f


def test_split_on_a_full_disk_leaves_no_shard_and_names_the_file(tmp_path):
    src = two_tensor_gguf(tmp_path / "m.gguf", big=1 << 18)  # shard 2 ~1 MB, shard 1 ~200 bytes
    r = run_tool("gguf-split", src, tmp_path / "x", "--max-tensors", "1", preexec_fn=_limit_file_size(100_000))
    assert_clean_error(r, "x-00002-of-00002.gguf", "File too large")
    assert ".tmp" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf"]  # no shard, no temp file


def test_join_on_a_full_disk_names_the_output(tmp_path):
    src = two_tensor_gguf(tmp_path / "m.gguf", big=1 << 18)
    parts = gguf_join.split_raw(src, 2, tmp_path)
    r = run_tool("gguf-join", *parts, "-o", tmp_path / "j.gguf", "--no-checksum", preexec_fn=_limit_file_size(100_000))
    assert_clean_error(r, "j.gguf", "File too large")
    assert "error: : " not in r.stderr and ".tmp" not in r.stderr
    assert not (tmp_path / "j.gguf").exists()


def test_split_interrupted_midway_leaves_no_shard(tmp_path, monkeypatch):
    src = two_tensor_gguf(tmp_path / "m.gguf")
    real, calls = gguf_join.write_gguf, []

    def interrupted(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(gguf_join, "write_gguf", interrupted)
    with pytest.raises(KeyboardInterrupt):
        split_gguf(src, tmp_path / "x", max_tensors=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf"]


def test_split_whose_final_renames_fail_says_what_was_left(tmp_path, monkeypatch):
    import os

    from cookbook import files

    src = two_tensor_gguf(tmp_path / "m.gguf")
    real, calls = os.replace, []

    def failing(a, b, *args, **kw):
        calls.append(b)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(a, b, *args, **kw)

    monkeypatch.setattr(files.os, "replace", failing)
    with pytest.raises(OSError) as e:
        split_gguf(src, tmp_path / "x", max_tensors=1)
    msg = str(e.value)
    assert "x-00002-of-00002.gguf" in msg and "no shard" in msg.lower()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf"]  # the one renamed shard was taken back


def test_outputs_get_the_usual_mode_not_the_temp_files_0600(tmp_path):
    import os
    import stat

    src = two_tensor_gguf(tmp_path / "m.gguf")
    mask = os.umask(0o022)
    try:
        shards = split_gguf(src, tmp_path / "x", max_tensors=1)
        fuse_checkpoint(quark_dir(tmp_path / "src"), tmp_path / "out", progress=False)
    finally:
        os.umask(mask)
    assert stat.S_IMODE(shards[0].stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755
