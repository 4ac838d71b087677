"""Shared test setup. Keep small: areas put their fixtures in their own conftest.

Two tiers (tests/helpers/slow_tier.py): `pytest` runs the fast one, which `make test` is;
`pytest --tier slow [--area AREA]` runs the real-part checks marked `slow_tier(AREA)`.
"""

from pathlib import Path

import pytest
from convert_helpers import small_gguf_bytes
from slow_tier import AREAS


def pytest_addoption(parser):
    group = parser.getgroup("cookbook tiers")
    group.addoption(
        "--tier",
        choices=("fast", "slow", "all"),
        default="fast",
        help="fast (default, `make test`): leave out the tests marked slow_tier; slow (`make test-slow`): "
        "only those; all: both",
    )
    group.addoption(
        "--area",
        action="append",
        choices=sorted(AREAS),
        help="with --tier slow: only this slow-tier area (repeatable; tests/helpers/slow_tier.py lists them)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "slow_tier(area): in `make test-slow` only, in that area")


def pytest_collection_modifyitems(config, items):
    _select_tier(config, items)
    _skip_docker_without_daemon(items)
    _skip_engine_without_engine(items)
    # The tests that share the session's CPU vLLM server run last and together: the server starts
    # with the session (_cpu_server_started) and comes up while the others run.
    items.sort(key=lambda item: "cpu_server" in getattr(item, "fixturenames", ()))


def _select_tier(config, items):
    tier, areas = config.getoption("tier"), config.getoption("area")
    if areas and tier == "fast":
        raise pytest.UsageError("--area picks slow-tier areas: give --tier slow with it")
    keep, drop = [], []
    for item in items:
        mark = item.get_closest_marker("slow_tier")
        if mark is not None and (not mark.args or mark.args[0] not in AREAS):
            raise pytest.UsageError(f"{item.nodeid}: slow_tier needs one of {sorted(AREAS)}, got {mark.args}")
        if tier == "fast":
            wanted = mark is None
        elif tier == "slow":
            wanted = mark is not None and (not areas or mark.args[0] in areas)
        else:
            wanted = True
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _skip_engine_without_engine(items):
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


@pytest.fixture(scope="session", autouse=True)
def _cpu_server_started(request, tmp_path_factory):
    """The fast tier's CPU vLLM, launched when the session's first test starts if any test to run
    uses it, so that its start (a minute or more on 2 cores) overlaps the other tests instead of
    being waited for (an idle server takes no CPU). None when no test needs it, and in the slow
    tier (whose tests start servers of their own: cpu_server starts it there when first asked);
    the exception when the launch failed."""
    items = request.session.items
    wanted = any("cpu_server" in item.fixturenames and not item.get_closest_marker("skip") for item in items)
    if not wanted or request.config.getoption("tier") != "fast":
        yield None
        return
    from cpu_engine import start_cpu_server

    try:
        server = start_cpu_server(tmp_path_factory.mktemp("cpu-server"))
    except Exception as exc:  # the tests that use the server fail with it (cpu_server), not every test
        yield exc
        return
    yield server
    server.stop()


@pytest.fixture(scope="session")
def cpu_server(_cpu_server_started, tmp_path_factory):
    """The session's one CPU vLLM: the embedded default recipe, launched by the product's own
    code on a free port (cpu_engine.py). Tests must not stop, pause or reconfigure it."""
    from cpu_engine import start_cpu_server, wait_cpu_server

    if isinstance(_cpu_server_started, Exception):
        raise _cpu_server_started
    if _cpu_server_started is not None:  # launched early; _cpu_server_started stops it
        yield wait_cpu_server(_cpu_server_started)
        return
    server = start_cpu_server(tmp_path_factory.mktemp("cpu-server"))
    yield wait_cpu_server(server)
    server.stop()


@pytest.fixture(scope="session")
def gemma_checkpoint() -> Path:
    """The packaged Gemma 3 270M as the CPU recipe's HF checkpoint: the one conversion, cached."""
    from cpu_engine import gemma_checkpoint

    return gemma_checkpoint()


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


@pytest.fixture(scope="session")
def gemma_gguf_py(gemma_gguf):
    """gguf-py's reader (the independent reference) over the packaged Gemma GGUF, parsed once a
    session: parsing its 262,144-entry vocabulary takes gguf-py 8-30 s on 2 cores."""
    from gguf import GGUFReader  # the dev extra's

    return GGUFReader(str(gemma_gguf))
