"""A stand-in for an OpenAI-compatible vLLM server, for the tests that kill their server: the
session's real one (cpu_engine.py) is shared and must live on.

It answers what the gate suite asks before and around a request (/v1/models, /metrics,
/tokenize) and streams completions one token every 50 ms until max_tokens, so a kill lands
mid-stream. Run as a process: `python openai_standin.py PORT MODEL`; it prints "ready" once it
listens.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import struct
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The vision gate's palette: the stand-in names the colour of the pixels it decodes.
from cookbook.gates.vision import COLOURS

MAX_MODEL_LEN = 10240


def _handler(model: str):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def setup(self):
            super().setup()
            # Each write goes out at once, as from uvicorn (vLLM's server sets TCP_NODELAY): with
            # Nagle's algorithm on, a stream's small chunks wait for the client's delayed ACK
            # (~40 ms) and arrive together, which aiohttp (the gates' stream reader) then reads as one.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

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


# --- A stand-in that answers the gates' questions, and can break exactly one check --------------
#
# `gate_standin(model, breaks)` serves, in a thread, a server that does what each gate asks of a
# good one: a word tokenizer that can be read back (ids <-> words), chat answers that read the
# needle codes in the prompt, a colour read from the PNG sent, content split from reasoning,
# prompt_logprobs that rank each text token first, streamed usage that counts tokens while one
# chunk carries up to three (as under speculative decoding). Each name in `breaks` breaks one check:
#   null_content    every chat reply's content is null, all of it given as reasoning (a wrong parser)
#   missing_needle  codes in the last quarter of a prompt are not found (the window's end is lost)
#   blind           the image is ignored: always 'red'
#   undercount      the streamed usage counts chunks, not tokens
#   wrong_golden    every tenth position ranks another token first, and logprobs shift by 0.3

NEEDLE_RE = re.compile(r"The special magic number for the ([a-z ]+?) is (\d{7})\.")


def _png_colour(url: str) -> str:
    """The colour name of a one-colour PNG data: URL (its first pixel)."""
    data = base64.b64decode(url.split(",", 1)[1])
    pos, idat = 8, b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + n]
        pos += 12 + n
    rgb = tuple(zlib.decompress(idat)[1:4])
    return min(COLOURS, key=lambda c: sum((a - b) ** 2 for a, b in zip(COLOURS[c], rgb)))


def gate_handler(model: str, breaks: frozenset = frozenset(), max_model_len: int | None = MAX_MODEL_LEN):
    vocab: dict[str, int] = {}
    words: list[str] = []
    lock = threading.Lock()

    def encode(text: str) -> list[int]:
        with lock:
            out = []
            for w in re.findall(r"\S+|\n", text):
                if w not in vocab:
                    vocab[w] = len(words) + 1
                    words.append(w)
                out.append(vocab[w])
            return out

    def decode(ids) -> str:
        return " ".join(words[i - 1] if 0 < i <= len(words) else "?" for i in ids)

    def needles_answer(text: str) -> str:
        found = []
        for m in NEEDLE_RE.finditer(text):
            if "missing_needle" in breaks and m.start() > 0.75 * len(text):
                continue
            found.append(f"The {m.group(1)} is {m.group(2)}.")
        return " ".join(found) or "I could not find it."

    class GateHandler(_handler(model)):
        def do_GET(self):
            if self.path == "/v1/models":
                data = {"data": [{"id": model, "object": "model", "max_model_len": max_model_len}]}
                self._send(200, json.dumps(data).encode())
            else:
                super().do_GET()

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/tokenize":
                if req.get("messages") is not None:
                    text = " ".join(
                        m["content"] if isinstance(m.get("content"), str) else "image" for m in req["messages"]
                    )
                else:
                    text = str(req.get("prompt") or "")
                ids = encode(text) or [encode("x")[0]]
                self._send(200, json.dumps({"tokens": ids, "count": len(ids)}).encode())
            elif self.path == "/v1/chat/completions":
                self._send(200, json.dumps(self._chat(req)).encode())
            elif self.path == "/v1/completions" and req.get("stream"):
                self._stream_tokens(int(req.get("max_tokens") or 16))
            elif self.path == "/v1/completions":
                self._send(200, json.dumps(self._completion(req)).encode())
            else:
                self._send(404, b"{}")

        def _chat(self, req: dict) -> dict:
            content = req["messages"][-1]["content"]
            if isinstance(content, list):  # an image request
                url = next(p["image_url"]["url"] for p in content if p.get("type") == "image_url")
                answer = "red" if "blind" in breaks else _png_colour(url).capitalize() + "."
            elif "special magic number" in content:
                answer = needles_answer(content)
            else:
                answer = "A short answer."
            message = {"role": "assistant", "content": answer, "reasoning": "Let me think about it."}
            if "null_content" in breaks:
                message = {"role": "assistant", "content": None, "reasoning": "Let me think. " + answer}
            return {
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"completion_tokens": len(answer.split())},
            }

        def _completion(self, req: dict) -> dict:
            prompt = req.get("prompt")
            ids = prompt if isinstance(prompt, list) else encode(str(prompt))
            n = int(req.get("max_tokens") or 16)
            choice = {"index": 0, "text": " x" * n, "finish_reason": "length"}
            if isinstance(prompt, list) and "special magic number" in decode(ids):
                choice["text"] = needles_answer(decode(ids))
            if req.get("prompt_logprobs"):
                plp = [None]
                for i, tok in enumerate(ids[1:], 1):
                    wrong = "wrong_golden" in breaks and i % 10 == 0
                    lp = -0.1 - (0.3 if "wrong_golden" in breaks else 0.0)
                    entry = {str(tok): {"logprob": lp, "rank": 2 if wrong else 1, "decoded_token": "w"}}
                    if wrong:
                        entry[str(tok + 1)] = {"logprob": -0.05, "rank": 1, "decoded_token": "v"}
                    plp.append(entry)
                choice["prompt_logprobs"] = plp
            return {"choices": [choice], "usage": {"prompt_tokens": len(ids), "completion_tokens": n}}

        def _stream_tokens(self, max_tokens: int) -> None:
            """Up to three tokens a chunk, as under speculative decoding; usage counts tokens
            (or, broken, chunks)."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            sent = chunks = 0
            while sent < max_tokens:
                k = min(3, max_tokens - sent)
                sent, chunks = sent + k, chunks + 1
                count = chunks if "undercount" in breaks else sent
                chunk = {"choices": [{"text": " x" * k, "finish_reason": None}], "usage": {"completion_tokens": count}}
                self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
                time.sleep(0.01)  # a decode step: long prompts sent meanwhile overlap the decodes
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

    return GateHandler


def gate_standin(model: str, breaks=(), max_model_len: int | None = MAX_MODEL_LEN):
    """(base_url, server) of a GateHandler stand-in serving in a daemon thread; call
    server.shutdown() when done."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), gate_handler(model, frozenset(breaks), max_model_len))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server
