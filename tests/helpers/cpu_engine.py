"""The one Gemma conversion and the one CPU vLLM server of a test session.

Both come from the product's own code, as `make run` makes them: the CPU recipe for this host
(cookbook.host_cpu: gemma3-270m-cpu, or its float32 child on a CPU without AVX-512 BF16)
fetched and converted by cookbook.serving.local into the recipe's CHECKPOINT_DIR
(.cache/models/gemma3-270m-hf, the folder `make run` fills), and its launch block started by `local.launch` on a free port
when the session starts, while the other tests run (start_cpu_server; wait_cpu_server waits for it). Every test that needs a live CPU vLLM shares
that server (the `cpu_server` fixture, tests/conftest.py); a test that kills its server uses a
stand-in (openai_standin.py) instead.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

from cookbook.host_cpu import cpu_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPE = cpu_recipe()
CHECKPOINT = REPO / ".cache" / "models" / "gemma3-270m-hf"
READY_TIMEOUT_S = 1500  # a cold start compiles the model: minutes on 2 cores


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(resolved) -> dict[str, str]:
    """The launch block's environment with the checkout and the checkpoint named absolutely, so
    the tests do not depend on the folder pytest was started from."""
    from cookbook.serving import local

    env = local.shell_env(local.fetch(resolved))
    env.update(COOKBOOK=str(REPO), CHECKPOINT_DIR=str(CHECKPOINT))
    local.run_convert_steps(resolved, local.exported_env(resolved, env))
    return env


def gemma_checkpoint() -> Path:
    """The packaged Gemma 3 270M as the recipe's bf16 HF checkpoint (converted once, then cached)."""
    from cookbook.recipe.resolve import resolve

    _env(resolve(RECIPE))
    return CHECKPOINT


def start_cpu_server(workdir: Path):
    """The embedded default recipe launched here on a free port; returns cookbook.serving.local.Server
    at once, before it answers (wait_cpu_server waits; the caller stops it)."""
    from cookbook.recipe.resolve import resolve
    from cookbook.serving import local

    resolved = resolve(RECIPE, sets=[f"serve.args.port={free_port()}"])
    # Started as `make run` starts it: from the checkout, the model named by the recipe's default
    # relative path. vLLM's compile-cache key hashes the model path, so an absolute one missed the
    # cache `make run` had just filled and compiled the model again (minutes on 2 cores).
    env = _env(resolved)
    env["CHECKPOINT_DIR"] = str(CHECKPOINT.relative_to(REPO))
    with contextlib.chdir(REPO):
        return local.launch(resolved, env, workdir)


def wait_cpu_server(server):
    """`server` once it answers; stopped, and the error raised, when it does not."""
    from cookbook.serving import local

    try:
        local.wait_ready(server, READY_TIMEOUT_S)
    except BaseException:
        server.stop()
        raise
    return server
