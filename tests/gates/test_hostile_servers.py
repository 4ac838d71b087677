"""Bad servers on 127.0.0.1 against the gate client: trickles, floods, garbage, deaths, 500s.

Each server is a real TCP listener speaking (or failing to speak) HTTP/1.1; every request loop
is bounded in count and time.
"""

import asyncio
import socket
import socketserver
import threading
import time

import pytest

from cookbook.gates import client
from cookbook.gates.client import RequestTimeout, ResponseTooLarge, Server, ServerDown, ServerError

HEAD_200 = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
HEAD_SSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def _trickle(sock):
    sock.sendall(HEAD_200)
    for _ in range(100):  # one byte every 0.1 s: never idle long enough for a per-read timeout
        sock.sendall(b"x")
        time.sleep(0.1)


def _flood(sock, head=HEAD_200):
    sock.sendall(head)
    block = b"y" * (1 << 20)
    for _ in range(200):  # at most 200 MiB, stopped by the client after 64
        sock.sendall(block)


BEHAVIOURS = {
    "trickle": _trickle,
    "flood": _flood,
    "flood-sse": lambda s: _flood(s, HEAD_SSE),
    "garbage": lambda s: s.sendall(b"\x00\xffnot http at all\r\n\r\n" * 10),
    "bad-chunk": lambda s: s.sendall(
        HEAD_SSE.replace(b"Connection: close", b"Transfer-Encoding: chunked") + b"ZZZ\r\ndata: x\r\n"
    ),
    "die-mid-stream": lambda s: s.sendall(
        HEAD_SSE.replace(b"Connection: close", b"Content-Length: 100000") + b'data: {"choices": []}\n\n'
    ),
    "error-500": lambda s: s.sendall(
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\noops"
    ),
}


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            data += chunk
        path = data.split(b" ", 2)[1].decode().strip("/")
        try:
            BEHAVIOURS[path](self.request)
        except OSError:  # the client hung up, as it should
            pass


@pytest.fixture(scope="module")
def bad_server():
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def call(base_url, coro_fn, timeout_s=1.5):
    async def go():
        server = Server(base_url, "m", request_timeout_s=timeout_s)
        try:
            return await coro_fn(server)
        finally:
            await server.aclose()

    return asyncio.run(go())


# Whole responses (httpx) and streams (aiohttp) are read by different clients: each case runs on both.
def _get_or_stream(method: str, path: str):
    return (lambda s: s.get_text(path)) if method == "get" else (lambda s: s.stream(path, {}))


def test_a_trickling_server_trips_the_total_deadline(bad_server):
    t0 = time.monotonic()
    with pytest.raises(RequestTimeout, match="1.5 s in all"):
        call(bad_server, lambda s: s.get_text("/trickle"))
    assert time.monotonic() - t0 < 4  # per-read timeouts alone would wait 10 s, then forever


def test_a_trickling_stream_trips_the_total_deadline(bad_server):
    t0 = time.monotonic()
    with pytest.raises(RequestTimeout):
        call(bad_server, lambda s: s.stream("/trickle", {}))
    assert time.monotonic() - t0 < 4


@pytest.mark.parametrize("path,method", [("/flood", "get"), ("/flood-sse", "stream")])
def test_a_flood_stops_at_the_response_cap(bad_server, path, method, monkeypatch):
    monkeypatch.setattr(client, "MAX_RESPONSE_BYTES", 4 << 20)
    with pytest.raises(ServerDown, match="MiB"):
        call(bad_server, _get_or_stream(method, path), timeout_s=30)


def test_response_too_large_is_a_server_fault():
    assert issubclass(ResponseTooLarge, ServerDown)


@pytest.mark.parametrize("path", ["/garbage", "/bad-chunk"])
@pytest.mark.parametrize("method", ["get", "stream"])
def test_garbage_is_server_down(bad_server, method, path):
    with pytest.raises(ServerDown):
        call(bad_server, _get_or_stream(method, path))


def test_a_death_mid_stream_is_server_down_with_the_chunks_kept(bad_server):
    with pytest.raises(ServerDown):
        call(bad_server, lambda s: s.stream("/die-mid-stream", {}))


@pytest.mark.parametrize("method", ["post", "stream"])
def test_a_500_is_a_server_error_with_its_body(bad_server, method):
    with pytest.raises(ServerError, match="HTTP 500: oops"):
        call(
            bad_server,
            (lambda s: s.post("/error-500", {})) if method == "post" else (lambda s: s.stream("/error-500", {})),
        )


@pytest.mark.parametrize("method", ["get", "stream"])
def test_nothing_listening_is_server_down(method):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ServerDown):
        call(f"http://127.0.0.1:{port}", _get_or_stream(method, "/x"))
