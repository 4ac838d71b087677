"""Shared test setup. Keep small: areas put their fixtures in their own conftest."""

from pathlib import Path

import pytest
from convert_helpers import small_gguf_bytes


def pytest_collection_modifyitems(config, items):
    # Tests marked `engine` need the pinned CPU vLLM; skip them visibly when it is absent.
    engine_items = [item for item in items if item.get_closest_marker("engine")]
    if not engine_items:
        return
    from cookbook.engine import SKIP_REASON, engine_installed

    if not engine_installed():
        skip = pytest.mark.skip(reason=SKIP_REASON)
        for item in engine_items:
            item.add_marker(skip)


# GGUF files shared by the gguf reader and converter tests.
@pytest.fixture
def small_gguf(tmp_path) -> Path:
    p = tmp_path / "small.gguf"
    p.write_bytes(small_gguf_bytes())
    return p


@pytest.fixture(scope="session")
def gemma_gguf() -> Path:
    from cookbook.models.gemma import gguf_path

    return gguf_path()
