"""The "Talk to it" examples of the recipe pages run as printed: the curl lines in bash (with
curl and jq) and the openai-client snippet in Python, against a stand-in chat server that
answers as vLLM does with a reasoning parser (`reasoning` beside `content`) and a tool parser
(`tool_calls`). A stand-in: no model server runs in the fast tier."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cookbook.recipe.resolve import resolve
from cookbook.site.talk import endpoint, talk_lines

needs_tools = pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")), reason="needs curl and jq")


@contextlib.contextmanager
def standin(model: str):
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send(200, {"data": [{"id": model, "object": "model"}]})

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(req)
            if self.path != "/v1/chat/completions" or req.get("model") != model:
                return self._send(404, {"error": {"message": f"no model {req.get('model')!r}"}})
            message = {"role": "assistant", "content": "2, 3 and 5.", "reasoning": "Small primes."}
            if req.get("tools"):
                call = {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
                message = {"role": "assistant", "content": None, "tool_calls": [call]}
            body = {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
            self._send(200, body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def blocks(lines: list[str], lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)\n```", "\n".join(lines), re.S)


def _serve(model, args):
    """A recipe's serve section as talk_lines reads it: model, args, and Serve.arg's lookup."""
    from types import SimpleNamespace

    from cookbook.recipe.model import Serve

    ns = SimpleNamespace(model=model, args=args)
    ns.arg = lambda key, default=None: Serve.arg(ns, key, default)
    return ns


@needs_tools
@pytest.mark.parametrize(
    "slug", ["glm52-8", "glm52-fp8-8x-h200"]
)  # chat models; the base model: test_talk_examples_engine.py
def test_the_pages_curl_and_openai_examples_run_against_a_standin(slug):
    resolved = resolve(slug)
    base, name = endpoint(resolved.recipe)
    lines = talk_lines(resolved)
    with standin(name) as (url, seen):
        outs = []
        for block in blocks(lines, "bash"):
            p = subprocess.run(["bash", "-c", block.replace(base, url)], capture_output=True, text=True, timeout=30)
            assert p.returncode == 0, p.stderr
            outs.append(p.stdout)
        py = blocks(lines, "python")[0].replace(base, url)
        p = subprocess.run([sys.executable, "-c", py], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
    assert all(req["model"] == name for req in seen) and len(seen) == len(outs) + 1
    reasoning = resolved.recipe.serve.args.get("reasoning_parser")
    if reasoning:  # the jq line and the client both show the thinking apart from the answer
        shown = json.loads(outs[0])
        assert shown == {"reasoning": "Small primes.", "content": "2, 3 and 5.", "finish_reason": "stop"}
        assert p.stdout.splitlines() == ["Small primes.", "2, 3 and 5."]
    else:
        assert outs[0].strip() == "2, 3 and 5." and p.stdout.strip() == "2, 3 and 5."
    if resolved.recipe.serve.args.get("tool_call_parser"):
        assert json.loads(outs[-1])[0]["function"]["name"] == "get_weather"
        assert seen[len(outs) - 1]["tools"][0]["function"]["name"] == "get_weather"


@needs_tools
def test_a_server_named_by_its_path_is_asked_for_its_name_first():
    """No --served-model-name: vLLM names the model by the path it was given; the example reads
    it from /v1/models into $MODEL and sends that."""
    from types import SimpleNamespace

    arg = SimpleNamespace
    recipe = SimpleNamespace(serve=_serve(model="$CHECKPOINT_DIR", args={"port": arg(value=8123)}))
    lines = talk_lines(SimpleNamespace(recipe=recipe))
    base, name = endpoint(recipe)
    assert (base, name) == ("http://localhost:8123", None)
    with standin("/models/some-checkpoint") as (url, seen):
        block = blocks(lines, "bash")[0].replace(base, url)
        p = subprocess.run(["bash", "-c", block], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        py = blocks(lines, "python")[0].replace(base, url)
        q = subprocess.run([sys.executable, "-c", py], capture_output=True, text=True, timeout=60)
        assert q.returncode == 0, q.stderr
    assert [req["model"] for req in seen] == ["/models/some-checkpoint"] * 2
    assert p.stdout.strip() == "2, 3 and 5." == q.stdout.strip()


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NAMES = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).filter(str.isprintable)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=NAMES, host=NAMES)
def test_a_hostile_served_name_or_host_stays_data_in_the_curl_example(name, host):
    """Whatever the recipe names its model or host, the curl line sends exactly that name to
    exactly that URL: bash runs it with curl and jq replaced by functions that print their input."""
    from types import SimpleNamespace

    arg = SimpleNamespace
    args = {"served_model_name": arg(value=name), "host": arg(value=host), "port": arg(value=8000)}
    recipe = SimpleNamespace(serve=_serve(model="/m", args=args))
    block = blocks(talk_lines(SimpleNamespace(recipe=recipe)), "bash")[0]
    fake = "curl() { printf '%s\\n' \"$2\"; printf '%s' \"$6\"; }\njq() { cat; }\n"
    p = subprocess.run(["bash", "-c", fake + block], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    url, body = p.stdout.split("\n", 1)
    assert url == f"http://{host}:8000/v1/chat/completions"
    assert json.loads(body)["model"] == name


def test_a_served_name_or_host_with_a_control_character_is_never_printed():
    """A newline could end the page's code fence: such a name is asked of the server instead."""
    from types import SimpleNamespace

    arg = SimpleNamespace
    args = {"served_model_name": arg(value="m\n```\n<script>"), "host": arg(value="h\nx")}
    recipe = SimpleNamespace(serve=_serve(model="/m", args=args))
    assert endpoint(recipe) == ("http://localhost:8000", None)
    text = "\n".join(talk_lines(SimpleNamespace(recipe=recipe)))
    assert "<script>" not in text and "$MODEL" in text
