"""Regression test of fix logprobs-decode-guard.

A checkpoint whose vocab is padded past its SentencePiece-style tokenizer (as Llama- and
Mistral-family checkpoints often are) returns padded ids among top_logprobs. Unpatched,
the first such request kills the API server; patched, it is answered.
"""

from __future__ import annotations

import math

import httpx
import pytest
from fixes_helpers import start_server

pytestmark = [pytest.mark.engine, pytest.mark.slow, pytest.mark.slow_tier("fixes")]

REQUEST = {
    "model": "gemma",
    "messages": [{"role": "user", "content": "Write a sentence about the sea."}],
    "max_tokens": 8,
    "temperature": 0,
    "logprobs": True,
    "top_logprobs": 5,
}


def test_unpatched_server_dies_on_padded_vocab_logprobs(pristine_tree, padded_vocab_model, tmp_path):
    server = start_server(pristine_tree, padded_vocab_model, tmp_path / "server.log")
    try:
        server.wait_ready()
        r = httpx.post(server.url + "/v1/chat/completions", json=REQUEST, timeout=300)
        assert r.status_code == 500
        server.proc.wait(timeout=120)  # the output handler failed: the server exits
        assert "TypeError: 'NoneType' object is not iterable" in server.tail(20000)
    finally:
        server.close()


def test_top_logprobs_with_padded_vocab(patched_tree, padded_vocab_model, tmp_path):
    server = start_server(patched_tree, padded_vocab_model, tmp_path / "server.log")
    try:
        server.wait_ready()
        r = httpx.post(server.url + "/v1/chat/completions", json=REQUEST, timeout=300)
        assert r.status_code == 200, r.text
        content = r.json()["choices"][0]["logprobs"]["content"]
        assert len(content) == 8
        tops = [t for pos in content for t in pos["top_logprobs"]]
        assert all(len(pos["top_logprobs"]) == 5 for pos in content)
        assert all(math.isfinite(t["logprob"]) for t in tops)
        # The padded ids were among them (decoded to ""), and the server still serves.
        assert any(t["token"] == "" for t in tops)
        assert httpx.get(server.url + "/v1/models", timeout=10).status_code == 200
    finally:
        server.close()
