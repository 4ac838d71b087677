"""A stand-in for an OpenAI-compatible vLLM server, for the tests that kill their server: the
session's real one (cpu_engine.py) is shared and must live on.

It answers what the gate suite asks before and around a request (/v1/models, /metrics,
/tokenize) and streams completions one token every 50 ms until max_tokens, so a kill lands
mid-stream. Run as a process: `python openai_standin.py PORT MODEL`; it prints "ready" once it
listens.
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_MODEL_LEN = 10240


def _handler(model: str):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/v1/models":
                data = {"data": [{"id": model, "object": "model", "max_model_len": MAX_MODEL_LEN}]}
                self._send(200, json.dumps(data).encode())
            elif self.path in ("/health", "/metrics"):
                self._send(200, b"", "text/plain")
            else:
                self._send(404, b"{}")

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/tokenize":
                words = str(req.get("prompt") or "").split() or ["x"]
                self._send(200, json.dumps({"tokens": list(range(1, len(words) + 1)), "count": len(words)}).encode())
            elif self.path == "/v1/completions" and req.get("stream"):
                self._stream(int(req.get("max_tokens") or 16))
            elif self.path == "/v1/completions":
                body = {"choices": [{"text": " x", "finish_reason": "length"}], "usage": {"completion_tokens": 1}}
                self._send(200, json.dumps(body).encode())
            else:
                self._send(404, b"{}")

        def _stream(self, max_tokens: int) -> None:
            # Chunked, as vLLM answers: a kill mid-stream leaves the last chunk unsent, so the client
            # sees a broken stream, not one that ended.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for n in range(1, max_tokens + 1):
                chunk = {"choices": [{"text": " x", "finish_reason": None}], "usage": {"completion_tokens": n}}
                self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
                time.sleep(0.05)
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def main(port: int, model: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(model))
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
