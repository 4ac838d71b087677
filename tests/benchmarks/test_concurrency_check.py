"""benchmarks/concurrency_check.py on CPU, against a stand-in server (a small HTTP server that admits at
most K requests at a time and exposes vLLM's three metric names): no GPU and no vLLM here. What it
checks is the script's reading of /metrics and its verdict against the plan's figure."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import benchmark_scripts
import pytest


@pytest.fixture(scope="module")
def cc():
    return benchmark_scripts.load("concurrency_check")


def _standin(slots: int, preempt: int = 0):
    state = {"running": 0, "waiting": 0, "preemptions": 0}
    lock = threading.Semaphore(slots)
    guard = threading.Lock()

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = (
                "# HELP vllm:num_requests_running x\n"
                f'vllm:num_requests_running{{engine="0",model_name="m"}} {state["running"]}\n'
                f'vllm:num_requests_waiting{{engine="0",model_name="m"}} {state["waiting"]}\n'
                f'vllm:num_preemptions_total{{engine="0",model_name="m"}} {state["preemptions"]}.0\n'
            ).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            with guard:
                state["waiting"] += 1
            with lock:
                with guard:
                    state["waiting"] -= 1
                    state["running"] += 1
                    state["preemptions"] += preempt
                time.sleep(0.6)
                with guard:
                    state["running"] -= 1
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"choices": []}')

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def test_metrics_are_read_as_vllm_writes_them(cc):
    text = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="x"} 3.0\n'
        'vllm:num_requests_running{engine="1",model_name="x"} 2.0\n'
        "vllm:num_requests_waiting 7\n"
        'vllm:num_preemptions_total{engine="0"} 1.0\n'
        'vllm:num_preemptions_created{engine="0"} 1.7e9\n'
    )
    assert cc.read_metrics(text) == {"running": 5.0, "waiting": 7.0, "preemptions": 1.0}


def test_the_standin_server_admits_what_the_plan_says(cc, tmp_path):
    srv, url = _standin(slots=4)
    try:
        res = cc.check(url, "m", 6, 16, 4, poll_s=0.05)
    finally:
        srv.shutdown()
    assert res["peak_running"] == 4 and res["peak_waiting"] >= 1 and res["preemptions"] == 0 and not res["failed"]
    assert cc.verdict(res, expect_seqs=4, typical_seqs=10) == []
    assert cc.verdict(res, expect_seqs=6, typical_seqs=10) == ["peak running 4, the plan says 6"]


def test_preemptions_below_the_typical_figure_disagree_with_the_plan(cc, tmp_path):
    srv, url = _standin(slots=3, preempt=1)
    try:
        rc = cc.main(
            ["glm52-fp8-8x-h200", "--url", url, "--model", "m", "--requests", "3", "--expect-seqs", "3",
             "--prompt-tokens", "8", "--output-tokens", "2", "--out", str(tmp_path)]
        )  # fmt: skip
    finally:
        srv.shutdown()
    assert rc == 1
    res = json.loads((tmp_path / "concurrency-glm52-fp8-8x-h200-3.json").read_text())
    assert res["preemptions"] == 3 and res["peak_running"] == 3
    # resumable: the saved result is read back, nothing is sent again (the server is gone)
    assert cc.main(["glm52-fp8-8x-h200", "--model", "m", "--requests", "3", "--expect-seqs", "3",
                    "--out", str(tmp_path)]) == 1  # fmt: skip


def test_dry_run_takes_the_recipes_traffic(cc, tmp_path, capsys):
    argv = ["glm52-fp8-8x-h200", "--model", "m", "--requests", "40", "--expect-seqs", "32", "--out", str(tmp_path)]
    assert cc.main([*argv, "--dry-run"]) == 0
    assert "40 x (8000 + 1024 tokens) at once" in capsys.readouterr().out and not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [["--requests", "0"], ["--requests", "100000"], ["--expect-seqs", "0"]])
def test_bad_counts_are_refused(cc, tmp_path, argv, capsys):
    base = {"--requests": "4", "--expect-seqs": "4"}
    base[argv[0]] = argv[1]
    flat = [x for kv in base.items() for x in kv]
    assert cc.main(["glm52-fp8-8x-h200", "--model", "m", *flat, "--out", str(tmp_path), "--dry-run"]) == 2
    assert "help:" in capsys.readouterr().err


def test_past_the_typical_figure_vllm_must_preempt_or_queue(cc):
    base = {"requests": 24, "failed": 0, "peak_running": 24, "peak_waiting": 0, "preemptions": 0}
    assert cc.verdict(base, expect_seqs=32, typical_seqs=16) == [
        "24 > 16 typical requests ran without a preemption or a wait: the plan is conservative here"
    ]
    assert cc.verdict({**base, "preemptions": 2}, expect_seqs=32, typical_seqs=16) == []
    assert cc.verdict({**base, "peak_waiting": 3, "peak_running": 21}, expect_seqs=32, typical_seqs=16) == []


@pytest.mark.parametrize(
    ("slug", "config"),
    [
        ("glm52-fp8-8x-h200", "recipes/glm52-fp8-8x-h200/engine-check/config.json"),
        ("dsv4-flash-8x-h200", "recipes/dsv4-flash-perf-h200/config.json"),
    ],
)
def test_the_self_served_check_sizes_the_pool_for_the_plans_figure(cc, slug, config, capsys, tmp_path):
    """--checkpoint: the block scaled as the engine check scales it, the pool set so the plan's typical
    figure is --target-seqs, and what it would send (dry run: nothing starts)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    argv = [slug, "--checkpoint", "/ck", "--config", str(root / config), "--out", str(tmp_path), "--dry-run"]
    assert cc.main(argv) == 0
    out = capsys.readouterr().out
    assert "--kv-cache-memory-bytes " in out and "--max-model-len 16384" in out and "--tensor-parallel-size 1" in out
    assert "plan: 16 typical requests" in out and "sending 16 then 24 requests" in out
    assert out.rstrip().splitlines()[-3].endswith("--load-format dummy --tokenizer-mode hf")
    assert not list(tmp_path.iterdir())


def test_the_self_served_check_refuses_bad_arguments(cc, tmp_path, capsys):
    assert cc.main(["glm52-fp8-8x-h200", "--checkpoint", "/ck", "--out", str(tmp_path)]) == 2  # no --config
    assert cc.main(["glm52-fp8-8x-h200", "--out", str(tmp_path)]) == 2  # neither a server nor a checkpoint
    assert capsys.readouterr().err.count("help:") == 2


@pytest.mark.parametrize("kind", ["fifo", "dir", "link", "truncated", "list", "bool", "big"])
def test_a_bad_saved_result_is_refused_with_one_message(cc, tmp_path, kind):
    import os

    path = tmp_path / "concurrency-glm52-fp8-8x-h200-3.json"
    good = {"requests": 3, "peak_running": 3, "peak_waiting": 0, "preemptions": 0, "failed": 0}
    if kind == "fifo":
        os.mkfifo(path)  # reading it would hang
    elif kind == "dir":
        path.mkdir()
    elif kind == "link":
        (tmp_path / "elsewhere.json").write_text(json.dumps(good))
        path.symlink_to(tmp_path / "elsewhere.json")
    elif kind == "truncated":
        path.write_text(json.dumps(good)[:20])
    elif kind == "list":
        path.write_text("[1, 2]")
    elif kind == "bool":
        path.write_text(json.dumps({**good, "preemptions": True}))
    else:
        path.write_text(json.dumps({**good, "pad": "x" * 2**20}))
    argv = ["glm52-fp8-8x-h200", "--model", "m", "--requests", "3", "--expect-seqs", "3", "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as e:
        cc.main(argv)
    assert "help: remove it to measure again" in str(e.value)
