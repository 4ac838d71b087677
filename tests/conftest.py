"""Shared test setup. Keep small: areas put their fixtures in their own conftest."""

import pytest


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
