"""Class 5: FIFOs, devices and directories are refused up front (none may hang a tool)."""

import os

import pytest
from hostile_helpers import assert_clean_error, gguf_file, quark_dir, run_tool

T = 20  # seconds: a tool blocked on a FIFO would hit this


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "pipe.gguf"
    os.mkfifo(p)
    return p


def test_inspect_refuses_a_fifo(fifo):
    assert_clean_error(run_tool("gguf-inspect", fifo, timeout=T), "pipe.gguf", "FIFO")


def test_inspect_refuses_a_device():
    assert_clean_error(run_tool("gguf-inspect", "/dev/zero", timeout=T), "/dev/zero", "character device")


def test_set_refuses_a_fifo(fifo):
    assert_clean_error(run_tool("gguf-set", fifo, "a=1", "--type", "u32", timeout=T), "FIFO")


def test_split_refuses_a_fifo(fifo, tmp_path):
    assert_clean_error(run_tool("gguf-split", fifo, tmp_path / "x", "--max-tensors", "1", timeout=T), "FIFO")
    assert_clean_error(run_tool("gguf-split", fifo, tmp_path, "--raw-parts", "2", timeout=T), "FIFO")


def test_to_hf_refuses_a_fifo(fifo, tmp_path):
    assert_clean_error(run_tool("gguf-to-hf", fifo, tmp_path / "o", timeout=T), "FIFO")
    assert not (tmp_path / "o").exists()


def test_join_refuses_a_fifo_part_and_a_fifo_sums_file(fifo, tmp_path):
    g = gguf_file(tmp_path / "m.gguf")
    r = run_tool("gguf-join", g, fifo, "-o", tmp_path / "j.gguf", "--no-checksum", timeout=T)
    assert_clean_error(r, "pipe.gguf", "FIFO")
    r = run_tool("gguf-join", g, "-o", tmp_path / "j.gguf", "--sha256sums", fifo, timeout=T)
    assert_clean_error(r, "pipe.gguf", "FIFO")
    assert not (tmp_path / "j.gguf").exists()


def test_quark_refuses_a_fifo_shard_and_a_fifo_side_file(tmp_path):
    src = quark_dir(tmp_path / "src")
    os.mkfifo(src / "tokenizer.json")
    assert_clean_error(run_tool("quark-mxfp4-fuse", src, tmp_path / "out", timeout=T), "tokenizer.json", "FIFO")
    os.unlink(src / "tokenizer.json")
    os.mkfifo(src / "model-2.safetensors")
    assert_clean_error(run_tool("quark-mxfp4-fuse", src, tmp_path / "out", timeout=T), "model-2.safetensors", "FIFO")
    assert not (tmp_path / "out").exists()
