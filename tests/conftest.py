"""Shared test setup. Keep small: areas put their fixtures in their own conftest."""

from pathlib import Path

import pytest
from convert_helpers import small_gguf_bytes


def pytest_collection_modifyitems(config, items):
    _skip_docker_without_daemon(items)
    # Tests marked `engine` need the pinned CPU vLLM; skip them visibly when it is absent.
    engine_items = [item for item in items if item.get_closest_marker("engine")]
    if not engine_items:
        return
    import os

    from cookbook.engine import SKIP_REASON, engine_installed, vllm_package_dir

    # `cookbook upgrade` runs fix regression tests against another version's engine
    # (COOKBOOK_ENGINE_PYTHON, COOKBOOK_FIX_UNPATCHED: tests/fixes/conftest.py); any engine will do then.
    probing = os.environ.get("COOKBOOK_FIX_UNPATCHED") and vllm_package_dir() is not None
    if not probing and not engine_installed():
        skip = pytest.mark.skip(reason=SKIP_REASON)
        for item in engine_items:
            item.add_marker(skip)


def _skip_docker_without_daemon(items):
    docker_items = [item for item in items if item.get_closest_marker("docker")]
    if not docker_items:
        return
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return
    except Exception as exc:  # any failure to reach it is the reason to skip
        reason = f"no Docker daemon answers ({type(exc).__name__}); start dockerd (.ci/run does)"
    for item in docker_items:
        item.add_marker(pytest.mark.skip(reason=reason))


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
