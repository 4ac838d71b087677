"""The suite's own deadline, and Ctrl-C: a server on 127.0.0.1 that lists the model, then stalls."""

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cookbook.gates.runner import SuiteConfig, run_suite
from cookbook.recipe.gates_spec import GatesSpec

MODEL = "m"


class _Stalling(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path == "/v1/models":
            body = json.dumps({"data": [{"id": MODEL, "max_model_len": 4096}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404)

    def do_POST(self):
        time.sleep(20)  # bounded: longer than any deadline below, then the thread ends
        self.send_error(503)


@pytest.fixture(scope="module")
def stalling_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Stalling)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _cfg(url, out, **kw):
    spec = GatesSpec.model_validate(
        {
            "calibrated_on": "test",
            "greedy": {"max_tokens": 4, "timeout_s": 60},
            "logprobs": {"requests": 1, "max_tokens": 4, "timeout_s": 60},
        }
    )
    return SuiteConfig(
        base_url=url, model=MODEL, spec=spec, out_dir=out, request_timeout_s=60, echo=lambda s: None, **kw
    )


def test_the_suite_deadline_fails_the_running_gate_and_skips_the_rest(stalling_server, tmp_path):
    t0 = time.monotonic()
    bundle = asyncio.run(run_suite(_cfg(stalling_server, tmp_path / "b", suite_timeout_s=2)))
    assert time.monotonic() - t0 < 10  # each gate alone would wait 60 s
    gates = bundle.doc["gates"]
    assert gates["greedy"]["status"] == "failed" and gates["greedy"]["fault"] == "suite_deadline"
    assert "--suite-timeout-s" in gates["greedy"]["reason"]
    assert gates["logprobs"]["status"] == "failed" and gates["logprobs"]["fault"] == "suite_deadline"
    assert "not run" in gates["logprobs"]["reason"]


def test_an_interrupted_suite_records_the_running_gate_as_failed(stalling_server, tmp_path):
    out = tmp_path / "b"

    async def go():
        task = asyncio.ensure_future(run_suite(_cfg(stalling_server, out)))
        await asyncio.sleep(1.5)
        task.cancel()  # what asyncio.run does on Ctrl-C
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    doc = json.loads((out / "results.json").read_text())
    assert doc["complete"] is False and doc["fault"] == "interrupted"
    assert doc["gates"]["greedy"]["status"] == "failed" and doc["gates"]["greedy"]["fault"] == "interrupted"


def test_after_a_gate_times_out_a_stalled_engine_stops_the_suite(stalling_server, tmp_path, monkeypatch):
    """Issue 64, item 11: a server whose /v1/models answers but whose completions stall. Without the
    stall probe every later gate waited out its own request timeout (600 s each by default); now
    one gate times out, a 1-token completion gets no answer, and the rest are not run."""
    from cookbook.gates import runner

    monkeypatch.setattr(runner, "STALL_PROBE_S", 1.0)
    t0 = time.monotonic()
    cfg = _cfg(stalling_server, tmp_path / "b")
    cfg.request_timeout_s = 2
    bundle = asyncio.run(run_suite(cfg))
    gates = bundle.doc["gates"]
    assert gates["greedy"]["fault"] == "request_timeout", gates["greedy"]
    assert gates["logprobs"]["fault"] == "server_stalled" and "not run" in gates["logprobs"]["reason"], gates
    assert bundle.doc["fault"] == "server_stalled"
    assert time.monotonic() - t0 < 8  # the timed-out gate (2 s) and the probe (1 s), not a second gate
