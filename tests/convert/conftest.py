from pathlib import Path

import pytest
from convert_helpers import small_gguf_bytes


@pytest.fixture
def small_gguf(tmp_path) -> Path:
    p = tmp_path / "small.gguf"
    p.write_bytes(small_gguf_bytes())
    return p


@pytest.fixture(scope="session")
def gemma_gguf() -> Path:
    from cookbook.models.gemma import gguf_path

    return gguf_path()
