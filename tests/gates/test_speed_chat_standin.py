"""The speed gate's chat workload (issue 51), against a stand-in server only: with `chat` set, after
the greedy sweep, the gate sends the built-in questions (or GSM8K's) to /v1/chat/completions at the
recipe's sampling, one user message each, and reports its levels under measured.chat with the
sweep's metric names; `gates verify`'s recompute gives the same figures and refuses a bundle whose
chat requests were sampled otherwise. Without `chat`, the gate sends no chat request, so bundles
recorded before the workload existed stay valid."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from http.server import ThreadingHTTPServer

import pytest
from openai_standin import gate_handler

from cookbook.evidence.recompute import agree
from cookbook.gates import gatedata, speed
from cookbook.gates.data import DataPaths
from cookbook.gates.recorded import RecordedRun
from cookbook.gates.runner import SuiteConfig, run_suite
from cookbook.recipe.gates_spec import GatesSpec

MODEL = "standin"
SPEED = {
    "sweep_concurrencies": [1, 2],
    "sweep_requests": 3,
    "sweep_max_tokens": 8,
    "ttft_prompts_tokens": [64],
}
# not the defaults (0.8 / 0.95): the requests must carry the recipe's own values
CHAT = {"temperature": 0.7, "top_p": 0.9, "max_tokens": 10}


def chat_streaming_handler(seen: list):
    """The gates' stand-in, plus streamed chat completions (role chunk, then up to two tokens a
    chunk with continuous usage, as vLLM streams them); every POST's path and body is kept."""
    base = gate_handler(MODEL)

    class Handler(base):
        def do_POST(self):
            if self.path != "/v1/chat/completions":
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                seen.append((self.path, json.loads(body or b"{}")))
                rfile, self.rfile = self.rfile, io.BytesIO(body)  # the base handler reads the body again
                try:
                    return super().do_POST()
                finally:
                    self.rfile = rfile
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            seen.append((self.path, req))
            if not req.get("stream"):
                return self._send(200, json.dumps(self._chat(req)).encode())
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            first = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
            first["usage"] = {"completion_tokens": 0}
            self._chunk(f"data: {json.dumps(first)}\n\n".encode())
            sent, n = 0, int(req.get("max_tokens") or 16)
            while sent < n:
                k = min(2, n - sent)
                sent += k
                chunk = {
                    "choices": [{"index": 0, "delta": {"content": " y" * k}}],
                    "usage": {"completion_tokens": sent},
                }
                self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
                time.sleep(0.005)
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

    return Handler


def run_speed(tmp_path, gate: dict, out: str = "b"):
    seen: list = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), chat_streaming_handler(seen))
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    spec = GatesSpec.model_validate({"speed": {"calibrated_on": "test", **gate}})
    try:
        bundle = asyncio.run(
            run_suite(
                SuiteConfig(
                    base_url=f"http://127.0.0.1:{srv.server_address[1]}",
                    model=MODEL,
                    spec=spec,
                    out_dir=tmp_path / out,
                    data=DataPaths.from_data_dir(tmp_path / "data"),
                    echo=lambda _s: None,
                )
            )
        )
    finally:
        srv.shutdown()
        srv.server_close()
    return bundle, spec, seen


def test_chat_workload_goes_to_the_chat_endpoint_at_the_recipes_sampling_standin(tmp_path):
    bundle, spec, seen = run_speed(tmp_path, {**SPEED, "chat": CHAT})
    g = bundle.doc["gates"]["speed"]
    assert g["status"] == "passed", g.get("reason")
    chats = [req for path, req in seen if path == "/v1/chat/completions"]
    assert len(chats) == 2 * 3  # each level's requests, nothing else on the chat endpoint
    for req in chats:
        assert req["stream"] is True and req["ignore_eos"] is True
        assert (req["temperature"], req["top_p"], req["max_tokens"]) == (0.7, 0.9, 10)
        assert [m["role"] for m in req["messages"]] == ["user"]
        assert req["messages"][0]["content"] in gatedata.tasks()  # the built-in questions
    # the greedy workload is unchanged: raw completions at temperature 0
    sweep = [req for path, req in seen if path == "/v1/completions" and isinstance(req.get("prompt"), str)]
    assert len(sweep) == 2 * 3 and all(r["temperature"] == 0.0 for r in sweep)

    chat = g["measured"]["chat"]
    assert chat["sampling"] == {"temperature": 0.7, "top_p": 0.9, "max_tokens": 10}
    assert chat["prompts"] == "builtin:cookbook-tasks" and chat["distinct_prompts"] == 6
    assert [row["concurrency"] for row in chat["sweep"]] == [1, 2]
    for row in chat["sweep"]:
        # the sweep's metric names, computed: every request's tokens counted from usage
        assert set(g["measured"]["sweep"][0]) == set(row)
        assert row["requests"] == 3 and row["total_tokens"] == 30
        assert row["output_throughput"] > 0 and row["median_ttft_ms"] > 0 and row["median_tpot_ms"] > 0
    assert set(chat["output_throughput"]) == {"1", "2"}

    # `gates verify` recomputes the same figures from the transcripts
    recorded = RecordedRun(tmp_path / "b", bundle.doc)
    got, _ = speed.recompute(recorded, spec.speed)
    assert agree(chat, got["chat"], 0.5, 0.02), (chat, got["chat"])
    assert all(ok for ok, _ in speed.verdict(got, g["items"], spec.speed))

    # a bundle whose chat requests were sent greedy is refused
    path = tmp_path / "b" / "transcripts" / "speed.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    for r in recs:
        if str(r.get("tag", "")).startswith("chat"):
            r["request"]["temperature"] = 0.0
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ValueError, match="the gate asks"):
        speed.recompute(RecordedRun(tmp_path / "b", bundle.doc), spec.speed)


def test_without_chat_the_gate_sends_no_chat_request_and_records_none_standin(tmp_path):
    bundle, spec, seen = run_speed(tmp_path, SPEED)
    g = bundle.doc["gates"]["speed"]
    assert g["status"] == "passed", g.get("reason")
    assert not [p for p, _ in seen if p == "/v1/chat/completions"]
    assert "chat" not in g["measured"] and "chat" not in g["thresholds"]
    got, _ = speed.recompute(RecordedRun(tmp_path / "b", bundle.doc), spec.speed)
    assert "chat" not in got


def test_chat_workload_bars_and_levels_are_judged():
    spec = GatesSpec.model_validate(
        {"speed": {"calibrated_on": "t", **SPEED, "chat": {**CHAT, "min_output_throughput_by_concurrency": [[2, 50]]}}}
    )
    rows = [{"concurrency": c, "requests": 3, "total_tokens": 30} for c in (1, 2)]
    chat = {
        "sweep": rows,
        "output_throughput": {"1": 30.0, "2": 40.0},
        "sampling": speed.chat_sampling(spec.speed.chat),
    }
    failures = [m for ok, m in speed.chat_verdict(chat, spec.speed) if not ok]
    assert failures == ["chat output_throughput at 2 streams 40.0 < 50.0"]
    failures = [m for ok, m in speed.chat_verdict({}, spec.speed) if not ok]
    assert any("chat measured at []" in m for m in failures)
    with pytest.raises(ValueError, match="not in sweep_concurrencies"):
        GatesSpec.model_validate(
            {"speed": {"calibrated_on": "t", "chat": {"min_output_throughput_by_concurrency": [[64, 1]]}}}
        )
    with pytest.raises(ValueError, match="chat prompts"):
        GatesSpec.model_validate({"speed": {"calibrated_on": "t", "chat": {"prompts": "../shared/gsm8k"}}})


def test_chat_prompts_from_gsm8k_read_the_data_path(tmp_path, data_dir):
    spec = GatesSpec.model_validate({"speed": {"calibrated_on": "t", **SPEED, "chat": {"prompts": "gsm8k"}}})
    qs = speed.chat_prompts(spec.speed, DataPaths.from_data_dir(data_dir))
    flat = [q for c in (1, 2) for q in qs[c]]
    assert len(flat) == 6 and len(set(flat)) == 6 and all(q.endswith("have now?") for q in flat)
