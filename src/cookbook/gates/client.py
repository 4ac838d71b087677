"""A small async client for an OpenAI-compatible server, recording every exchange.

Every request and response is appended to the gate's transcript (JSONL). Streamed
responses keep each chunk with its arrival time, and token counts come from the server's
usage (stream_options include_usage + continuous_usage_stats), because one streamed
chunk can carry several tokens (speculative decoding, tool and reasoning parsers).

Two HTTP clients, each where it is the better tool: httpx for whole responses (its Response
is what the gates read), aiohttp for streams. aiohttp parses HTTP in C (llhttp) and is the
client `vllm bench serve` times with. httpx's pure-Python parsing and pool work ran on the
event loop that stamps the other streams' arrivals, and a load level counted it as the server's
latency: against a stand-in with a fixed 20 ms first token at 16 streams the speed gate's
median TTFT read 1.16-1.32x bench's with httpx, 0.99-1.10x now (gates/README.md).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from cookbook.untrusted import loads_json


class ServerDown(Exception):
    """The server cannot be reached or dropped the connection."""


class RequestTimeout(Exception):
    """One request did not finish within the request timeout (a total deadline, not per read)."""


class ResponseTooLarge(ServerDown):
    """The server sent more than a gate can need; treated like a broken server."""


# A gate's largest answer (a long completion with top logprobs) is a few MB; more than this is
# a broken or hostile server, and reading on would only fill memory.
MAX_RESPONSE_BYTES = 64 << 20


class ServerError(Exception):
    """The server answered with an HTTP error."""

    def __init__(self, path: str, status: int, body: str):
        super().__init__(f"POST {path} -> HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body


class Transcript:
    """Append-only JSONL of requests and responses; flushed per line so a crash keeps it."""

    def __init__(self, path: Path | None):
        self.path = path
        self._fh = open(path, "a", encoding="utf-8") if path else None

    def write(self, record: dict[str, Any]) -> None:
        if self._fh:
            record = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **record}
            self._fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            self._fh.flush()

    def close(self) -> None:
        if self._fh:
            self._fh.close()
            self._fh = None


@dataclass
class Stream:
    """A streamed response: chunks with arrival times (s since the request was sent).

    A stream read with `deferred` (a load benchmark) keeps each event's text in `raw` and is
    parsed into `chunks` only once the measurement is over (parse())."""

    chunks: list[tuple[float, dict]] = field(default_factory=list)
    done_s: float = 0.0
    raw: list[tuple[float, str]] = field(default_factory=list)
    finished: str | None = None  # when it ended (ISO, UTC): a deferred record's time

    def parse(self) -> Stream:
        if self.raw:
            self.chunks += [(t, json.loads(data)) for t, data in self.raw]
            self.raw = []
        return self

    def token_times(self) -> list[tuple[float, int]]:
        """(arrival time, tokens in this chunk) for chunks whose usage count increased."""
        out, prev = [], 0
        for t, chunk in self.chunks:
            usage = chunk.get("usage") or {}
            n = usage.get("completion_tokens")
            if n is not None and n > prev:
                out.append((t, n - prev))
                prev = n
        return out

    @property
    def completion_tokens(self) -> int | None:
        for _, chunk in reversed(self.chunks):
            usage = chunk.get("usage")
            if usage and usage.get("completion_tokens") is not None:
                return usage["completion_tokens"]
        return None

    @property
    def ttft_s(self) -> float | None:
        times = self.token_times()
        return times[0][0] if times else None

    def finish_reasons(self) -> list[str]:
        return [c["finish_reason"] for _, ch in self.chunks for c in ch.get("choices", []) if c.get("finish_reason")]


class Server:
    def __init__(self, base_url: str, model: str, request_timeout_s: float = 300.0):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.transcript = Transcript(None)
        self.extra: dict[str, Any] = {}  # the current gate's request_extra
        self.last_elapsed_s = 0.0  # the last post()'s client time, s
        self.request_timeout_s = request_timeout_s
        self.http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(request_timeout_s, connect=10.0),
            # Every connection kept alive: a load level of N streams reuses N connections rather
            # than opening new ones past a smaller keep-alive pool (connection setup is not TTFT).
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=512),
        )
        self._streams: aiohttp.ClientSession | None = None  # made in the running loop, on first stream

    def _stream_session(self) -> aiohttp.ClientSession:
        if self._streams is None or self._streams.closed:
            self._streams = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=512, keepalive_timeout=60),
                timeout=aiohttp.ClientTimeout(total=None),  # each stream sets its own (_read_stream)
                trust_env=True,  # HTTP(S)_PROXY and NO_PROXY, as httpx honours them
            )
        return self._streams

    async def aclose(self) -> None:
        await self.http.aclose()
        if self._streams is not None:
            await self._streams.close()

    async def _send(self, method: str, path: str, **kw) -> httpx.Response:
        """The whole response, read within the request timeout and at most MAX_RESPONSE_BYTES."""

        async def read() -> httpx.Response:
            async with self.http.stream(method, path, **kw) as r:
                body = await self._capped(r.aiter_bytes(), f"{method} {r.request.url}")
                # The body is already decoded; keep the headers that still describe it.
                headers = [
                    (k, v) for k, v in r.headers.items() if k.lower() not in ("content-encoding", "content-length")
                ]
                resp = httpx.Response(r.status_code, headers=headers, content=body, request=r.request)
                # JSON and Prometheus text are UTF-8: a declared charset (utf-16, a bogus one) is not trusted
                resp.encoding = "utf-8"
                return resp

        try:
            return await asyncio.wait_for(read(), timeout=self.request_timeout_s)
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
            raise ServerDown(f"{method} {self.base_url}{path}: {type(e).__name__}: {e}") from e
        except (httpx.TimeoutException, asyncio.TimeoutError) as e:
            raise RequestTimeout(
                f"{method} {self.base_url}{path}: not answered within the request timeout "
                f"({self.request_timeout_s:g} s in all)"
            ) from e

    async def get_text(self, path: str) -> str:
        r = await self._send("GET", path)
        if r.status_code != 200:
            raise ServerError(path, r.status_code, r.text)
        return r.text

    async def get_json(self, path: str) -> Any:
        text = await self.get_text(path)
        try:
            return loads_json(text, what=f"GET {path}'s answer")
        except ValueError as e:  # a 200 that is not JSON (a proxy's page): a broken server, one line
            raise ServerError(path, 200, str(e)) from None

    async def post(self, path: str, payload: dict, tag: str = "") -> dict:
        payload = {"model": self.model, **payload, **self.extra}
        t0 = time.perf_counter()
        r = await self._send("POST", path, json=payload)
        elapsed = time.perf_counter() - t0
        self.last_elapsed_s = round(elapsed, 4)  # as the transcript records it
        body: Any
        try:
            body = r.json()
        except ValueError:
            body = r.text
        self.transcript.write(
            {
                "tag": tag,
                "path": path,
                "request": payload,
                "status": r.status_code,
                "elapsed_s": round(elapsed, 4),
                "response": body,
            }
        )
        if r.status_code != 200:
            raise ServerError(path, r.status_code, r.text)
        return body

    async def stream(
        self, path: str, payload: dict, tag: str = "", on_chunk=None, deferred: list | None = None
    ) -> Stream:
        """POST with stream=True; `on_chunk(t_s, chunk)` is called as each chunk arrives.

        With `deferred` (a list), the stream is timed and nothing else: its events are kept as
        text, and its JSON parsing and transcript record wait in `deferred` until
        write_deferred(), after the measurement. Under load the client's own work would
        otherwise run while other streams' chunks wait, and be counted as the server's latency
        (the speed gate read TTFT 2-3x `vllm bench serve`'s at 64 streams)."""
        payload = {
            "model": self.model,
            **payload,
            **self.extra,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        out = Stream()
        raw = deferred is not None and on_chunk is None
        t0 = time.perf_counter()
        try:
            # No task between t0 and the request (asyncio.wait_for made one, which waited its turn
            # behind the other streams' chunks and read as TTFT): aiohttp keeps the total deadline.
            await self._read_stream(path, payload, tag, out, t0, on_chunk, raw)
        except asyncio.TimeoutError as e:
            self.transcript.write(
                {
                    "tag": tag,
                    "path": path,
                    "request": payload,
                    "status": None,
                    "error": "request timeout",
                    "chunks": [c for _, c in out.parse().chunks],
                }
            )
            raise RequestTimeout(
                f"POST {self.base_url}{path} (stream): not finished within the request "
                f"timeout ({self.request_timeout_s:g} s in all)"
            ) from e
        # every other aiohttp failure (refused, dropped, malformed HTTP: ClientResponseError) is the server's
        except (aiohttp.ClientError, ResponseTooLarge) as e:
            self.transcript.write(
                {
                    "tag": tag,
                    "path": path,
                    "request": payload,
                    "status": None,
                    "error": str(e),
                    "chunks": [c for _, c in out.parse().chunks],
                }
            )
            raise ServerDown(f"POST {self.base_url}{path} (stream): {type(e).__name__}: {e}") from e
        out.done_s = time.perf_counter() - t0
        out.finished = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        if raw:
            deferred.append((tag, path, payload, out))
        else:
            self._record_stream(tag, path, payload, out)
        return out

    def _record_stream(self, tag: str, path: str, payload: dict, out: Stream) -> None:
        self.transcript.write(
            {
                "tag": tag,
                "path": path,
                "request": payload,
                "status": 200,
                "elapsed_s": round(out.done_s, 4),
                "chunks": [{"t_s": round(t, 4), **c} for t, c in out.parse().chunks],
                # when the stream ended, not when this was written (recompute times levels from it)
                **({"time": out.finished} if out.finished else {}),
            }
        )

    def write_deferred(self, deferred: list) -> None:
        """Parse and record the streams a measurement deferred (in the order they finished)."""
        while deferred:
            self._record_stream(*deferred.pop(0))

    async def _read_stream(
        self, path: str, payload: dict, tag: str, out: Stream, t0: float, on_chunk, raw: bool = False
    ) -> None:
        """Server-sent events, split into lines here so that no line or total exceeds MAX_RESPONSE_BYTES."""
        deadline = aiohttp.ClientTimeout(total=self.request_timeout_s, sock_connect=10.0)
        async with self._stream_session().post(self.base_url + path, json=payload, timeout=deadline) as r:
            if r.status != 200:
                text = (await self._capped(r.content.iter_any(), f"POST {r.url}")).decode(errors="replace")
                self.transcript.write(
                    {"tag": tag, "path": path, "request": payload, "status": r.status, "response": text}
                )
                raise ServerError(path, r.status, text)
            received, pending = 0, b""
            async for part in r.content.iter_any():
                t = time.perf_counter() - t0  # arrival: every event in this read arrived by now
                received += len(part)
                if received > MAX_RESPONSE_BYTES:
                    raise ResponseTooLarge(f"the stream passed {MAX_RESPONSE_BYTES >> 20} MiB; a gate needs far less")
                *lines, pending = (pending + part).split(b"\n")
                for line in lines:
                    if self._event(line.decode(errors="replace").strip(), path, payload, tag, out, t, on_chunk, raw):
                        return
            t = time.perf_counter() - t0
            self._event(pending.decode(errors="replace").strip(), path, payload, tag, out, t, on_chunk, raw)

    def _event(
        self, line: str, path: str, payload: dict, tag: str, out: Stream, t: float, on_chunk, raw: bool = False
    ) -> bool:
        """Handle one SSE line that arrived t s after sending; True at [DONE]."""
        if not line.startswith("data:"):
            return False
        data = line[5:].strip()
        if data == "[DONE]":
            return True
        if raw and '"error"' not in data:  # a cheap test; one that may be an error event is parsed now
            out.raw.append((t, data))
            return False
        chunk = json.loads(data)
        out.parse().chunks.append((t, chunk))
        # vLLM reports mid-stream failures as an SSE event (the chunk, not the (time, chunk) pair)
        if isinstance(chunk, dict) and "error" in chunk:
            self.transcript.write(
                {"tag": tag, "path": path, "request": payload, "status": 200, "chunks": [c for _, c in out.chunks]}
            )
            raise ServerError(path, 200, json.dumps(chunk["error"]))
        if on_chunk:
            on_chunk(*out.chunks[-1])
        return False

    @staticmethod
    async def _capped(parts, what: str) -> bytes:
        """A body from its byte parts (httpx's aiter_bytes or aiohttp's iter_any), at most MAX_RESPONSE_BYTES."""
        body = bytearray()
        async for part in parts:
            body += part
            if len(body) > MAX_RESPONSE_BYTES:
                raise ResponseTooLarge(
                    f"{what}: the response passed {MAX_RESPONSE_BYTES >> 20} MiB; a gate needs far less"
                )
        return bytes(body)

    async def tokenize(self, *, prompt: str | None = None, messages: list | None = None) -> list[int]:
        """Token ids from the server's own tokenizer (vLLM /tokenize); messages get the chat template."""
        payload: dict[str, Any] = {"model": self.model}
        if messages is not None:
            payload.update(messages=messages, add_generation_prompt=True)
        else:
            payload.update(prompt=prompt, add_special_tokens=False)
        r = await self._send("POST", "/tokenize", json=payload)
        if r.status_code != 200:
            self.transcript.write({"path": "/tokenize", "status": r.status_code, "response": r.text[:2000]})
            raise ServerError("/tokenize", r.status_code, r.text)
        tokens = r.json()["tokens"]
        # Counts only: the text itself is in the request that uses it.
        self.transcript.write(
            {
                "path": "/tokenize",
                "status": 200,
                "chat": messages is not None,
                "chars": len(prompt or "")
                if messages is None
                else sum(len(str(m.get("content", ""))) for m in messages),
                "count": len(tokens),
            }
        )
        return tokens


async def bounded_gather(limit: int, coros):
    """Run coroutines with at most `limit` in flight; results in order; first error propagates."""
    sem = asyncio.Semaphore(limit)

    async def one(c):
        try:
            async with sem:
                return await c
        finally:
            c.close()  # no-op once finished; silences a coroutine cancelled before it started

    tasks = [asyncio.ensure_future(one(c)) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
