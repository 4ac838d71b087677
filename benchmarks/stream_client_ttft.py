#!/usr/bin/env python3
"""The gate's stream client against `vllm bench serve`'s, on a server whose timing is fixed.

A stand-in OpenAI completions server (FastAPI on uvicorn, as vLLM's own, in a child process)
answers every streamed request with its first token after --ttft-ms and then --chunks chunks
--itl-ms apart. Both clients send the same --requests prompts at --concurrency streams:
  gate:  cookbook.gates.client.Server.stream (what the speed gate times with);
  bench: vllm.benchmarks.lib.endpoint_request_func.async_request_openai_completions on an
         aiohttp session, as `vllm bench serve` runs it.
Rounds alternate which goes first. The server's TTFT is known, so whatever a client reads
above it is the client's own cost on the event loop. Needs vllm importable (the CPU engine).

    .venv/bin/python benchmarks/stream_client_ttft.py --concurrency 16 --requests 128 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time

STANDIN = r"""
import asyncio, json, sys
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
import uvicorn
port, ttft, itl, n = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
app = FastAPI()
@app.post("/v1/completions")
async def completions(req: Request):
    body = await req.json()
    usage = bool((body.get("stream_options") or {}).get("continuous_usage_stats"))
    async def events():
        await asyncio.sleep(ttft)
        for k in range(1, n + 1):
            if k > 1:
                await asyncio.sleep(itl)
            c = {"id": "x", "object": "text_completion", "choices": [{"index": 0, "text": " x", "finish_reason": None}]}
            if usage:
                c["usage"] = {"prompt_tokens": 10, "completion_tokens": k, "total_tokens": 10 + k}
            yield f"data: {json.dumps(c)}\n\n"
        yield "data: [DONE]\n\n"
    return StreamingResponse(events(), media_type="text/event-stream")
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def gate(url: str, prompts: list[str], c: int, n: int) -> list[float]:
    from cookbook.gates.client import Server

    server, deferred, sem = Server(url, "m"), [], asyncio.Semaphore(c)

    async def one(p):
        async with sem:
            return await server.stream("/v1/completions", {"prompt": p, "max_tokens": n}, deferred=deferred)

    try:
        streams = await asyncio.gather(*[one(p) for p in prompts])
    finally:
        await server.aclose()
    return [s.parse().ttft_s * 1e3 for s in streams]


async def bench(url: str, prompts: list[str], c: int, n: int, usage: bool = False) -> list[float]:
    import aiohttp
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncInput, async_request_openai_completions

    sem = asyncio.Semaphore(c)
    timeout = aiohttp.ClientTimeout(total=3600)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c), timeout=timeout) as session:

        async def one(p):
            async with sem:
                # usage: bench's requests ask for usage in every chunk as the gate's do (same server work)
                extra = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}} if usage else None
                req = RequestFuncInput(
                    prompt=p, api_url=url + "/v1/completions", prompt_len=10, output_len=n, model="m", extra_body=extra
                )
                return await async_request_openai_completions(req, session)

        results = await asyncio.gather(*[one(p) for p in prompts])
    return [r.ttft * 1e3 for r in results]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--itl-ms", type=float, default=3.0)
    ap.add_argument("--chunks", type=int, default=64)
    ap.add_argument(
        "--same-server-work",
        action="store_true",
        help="bench's requests also ask for continuous_usage_stats (the gate's do), so the server does the same work",
    )
    args = ap.parse_args()
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, "-c", STANDIN, str(port), str(args.ttft_ms / 1e3), str(args.itl_ms / 1e3), str(args.chunks)]
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):  # up within 10 s
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.1)
        # ~1,500 words a prompt, each distinct, as the gate's prompts are a few thousand tokens
        prompts = [f"{i} " + "word " * 1500 for i in range(args.requests)]
        print(
            f"server TTFT {args.ttft_ms} ms; {args.concurrency} streams, {args.requests} requests; load {os.getloadavg()}"
        )
        for r in range(args.rounds):
            order = (("gate", gate), ("bench", bench)) if r % 2 == 0 else (("bench", bench), ("gate", gate))
            for name, fn in order:
                more = {"usage": True} if name == "bench" and args.same_server_work else {}
                xs = asyncio.run(fn(url, prompts, args.concurrency, args.chunks, **more))
                print(f"round {r + 1} {name:5s} median TTFT {statistics.median(xs):7.2f} ms  min {min(xs):7.2f} ms")
    finally:
        child.terminate()
        child.wait()


if __name__ == "__main__":
    main()
