"""`gates run` stops without an asyncio traceback (issue 48, item 12): when a stress decode ends
before every decode was seen streaming, the cancelled gather of the waits used to be logged at exit
("_GatheringFuture exception was never retrieved ... CancelledError"). The server is the stand-in
(tests/helpers/openai_standin.py) answering every streamed completion with HTTP 500, so a decode
always ends first."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from openai_standin import _handler

ROOT = Path(__file__).resolve().parents[2]
SLUG = "gemma3-270m-cpu"


class FailingStreams(_handler("gemma3-270m")):
    """The stand-in, but every streamed completion is answered 500: each stress decode fails at once,
    before any decode is seen streaming."""

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path == "/v1/completions" and json.loads(raw or b"{}").get("stream"):
            self._send(500, b'{"error": "no streams here"}')
            return
        # read again, whole, by the stand-in's own handler; then the socket's reader again, or the
        # next request on this kept-alive connection would read an empty body, close it, and race
        # the client's reuse of it ("Server disconnected without sending a response")
        rfile, self.rfile = self.rfile, io.BytesIO(raw)
        try:
            super().do_POST()
        finally:
            self.rfile = rfile


def _gates_run_against(handler, out_dir, gate: str) -> subprocess.CompletedProcess:
    """`cookbook gates run SLUG --only GATE` against the handler, served in this process."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        return subprocess.run(
            [sys.executable, "-m", "cookbook.cli", "gates", "run", SLUG, "--base-url", url, "--only", gate]
            + ["--out", str(out_dir)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.shutdown()
        server.server_close()


def test_stress_with_a_decode_that_fails_first_leaves_no_traceback_standin(tmp_path):
    run = _gates_run_against(FailingStreams, tmp_path / "bundle", "stress")
    out = run.stdout + run.stderr
    assert "stress" in run.stdout and "failed" in run.stdout and "500" in out, out  # the case was reached
    assert "never retrieved" not in out and "CancelledError" not in out and "Traceback" not in out, out


class Utf16Labels(_handler("gemma3-270m")):
    """The stand-in, every answer labelled `charset=utf-16` while its bytes are UTF-8 JSON, as a
    misconfigured proxy sends them."""

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        super()._send(status, body, f"{ctype}; charset=utf-16")


def test_a_utf16_content_type_is_read_as_the_utf8_it_is_standin(tmp_path):
    run = _gates_run_against(Utf16Labels, tmp_path / "bundle", "stress")
    out = run.stdout + run.stderr
    assert "Traceback" not in out and "UnicodeError" not in out, out
    assert "stress           passed" in run.stdout, out  # /v1/models and /tokenize were read as JSON


@pytest.mark.parametrize(
    "url", ["not a url", "http://[::1", "ftp://127.0.0.1:1/", "http://127.0.0.1:99999", "http://x/\x1b[2J", "http://"]
)
def test_a_bad_base_url_is_one_message_before_any_request(tmp_path, url):
    run = subprocess.run(
        [str(ROOT / "gates" / "run.sh"), SLUG, "--base-url", url, "--out", str(tmp_path / "bundle")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and run.stderr.startswith("error: --base-url "), run.stderr
    assert run.stderr.count("error:") == 1 and "Traceback" not in run.stderr and "\x1b" not in run.stderr
    assert not (tmp_path / "bundle").exists()
