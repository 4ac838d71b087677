"""Issue 64, item 10: one bounded reader for untrusted JSON (cookbook.untrusted.loads_json): size,
depth and integer digits each one ValueError; a server whose /v1/models is not JSON is one message
for `gates run` and for `cookbook serve`'s readiness wait, never a traceback."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.untrusted import JSON_MAX_DEPTH, loads_json


@pytest.mark.parametrize(
    "text,why",
    [
        ("[" * 5000 + "]" * 5000, "nests more than"),
        ("[" * (JSON_MAX_DEPTH + 1) + "]" * (JSON_MAX_DEPTH + 1), "nests more than"),
        ('{"a": ' + "9" * 5000 + "}", "not JSON"),
        ("<html>", "not JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        ("x" * 101, "more than the 100"),
    ],
    ids=["recursion", "depth", "5000 digits", "html", "not utf-8", "size"],
)
def test_loads_json_refuses_in_one_valueerror(text, why):
    with pytest.raises(ValueError, match=why):
        loads_json(text, max_bytes=100 if len(text) == 101 else 1 << 20)


def test_loads_json_takes_what_a_bundle_holds():
    deep = "[" * JSON_MAX_DEPTH + "]" * JSON_MAX_DEPTH
    assert loads_json(deep) and loads_json('{"a": [1, 2.5, "x", null]}') == {"a": [1, 2.5, "x", None]}


class NotVllm(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        body = b"<html>a proxy's page</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_gates_run_against_a_non_json_models_answer_is_one_message(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotVllm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        res = CliRunner().invoke(
            main,
            ["gates", "run", "gemma3-270m-cpu", "--base-url", url, "--only", "greedy", "--out", str(tmp_path / "b")],
        )
    finally:
        server.shutdown()
        server.server_close()
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code != 0 and "not JSON" in res.output and "Traceback" not in res.output, res.output


@pytest.mark.parametrize("body", [b"<html>", b"[]", b'{"data": [{"name": 1}]}', b'{"data": [{"id": 5}]}', b"[" * 3000])
def test_serve_readiness_names_a_server_that_is_not_vllm(body):
    from cookbook.serving.local import ServeError, _served_names

    with pytest.raises(ServeError, match="is not vLLM"):
        _served_names(body)
    assert _served_names(b'{"data": [{"id": "gemma3-270m"}]}') == ["gemma3-270m"]
