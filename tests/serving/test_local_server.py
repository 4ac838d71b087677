"""Server.stop ends the whole process group, children included, before returning; Server.paused
stops the whole group inside its block and continues it after."""

import subprocess
import time
from pathlib import Path

from cookbook.serving.local import Server, _group_alive, convert_command, convert_steps, exported_env, shell_env


def _start(tmp_path: Path, script: str) -> Server:
    log = tmp_path / "log"
    proc = subprocess.Popen(
        ["bash", "-c", script], stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    time.sleep(0.5)
    return Server(proc, log, "http://127.0.0.1:1")


def test_stop_waits_for_children_that_outlive_the_shell(tmp_path):
    # The child shrugs off SIGTERM for 2 s (like an engine shutting down), the shell dies at once.
    server = _start(
        tmp_path,
        "python3 -c 'import signal,time; signal.signal(signal.SIGTERM, lambda *a: "
        "(time.sleep(2), exit(0))); time.sleep(300)' & wait",
    )
    pgid = server.process.pid
    t0 = time.monotonic()
    server.stop(grace_s=10)
    assert not _group_alive(pgid)
    assert time.monotonic() - t0 >= 1.5, "returned before the child finished shutting down"


def test_stop_kills_a_group_that_ignores_sigterm(tmp_path):
    server = _start(
        tmp_path,
        "trap '' TERM; python3 -c 'import signal,time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)' & wait",
    )
    pgid = server.process.pid
    server.stop(grace_s=1)
    assert not _group_alive(pgid)


def _cpu_ticks(pgid: int) -> int:
    """utime + stime of every process in the group, from /proc"""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # pgrp
            total += int(fields[11]) + int(fields[12])
    return total


def _ticks_grow(pgid: int, by: int, within_s: float = 60.0) -> bool:
    """True once the group has used `by` more ticks of CPU (a loaded machine starts it late)."""
    start, deadline = _cpu_ticks(pgid), time.monotonic() + within_s
    while time.monotonic() < deadline:
        if _cpu_ticks(pgid) >= start + by:
            return True
        time.sleep(0.1)
    return False


def test_a_paused_group_takes_no_cpu_and_runs_again_after(tmp_path):
    # a busy child of the shell, as an idle server's engine is a child of its launch block
    server = _start(tmp_path, "python3 -c 'while True: pass' & wait")
    pgid = server.process.pid
    try:
        assert _ticks_grow(pgid, 10), "the busy child never ran"
        with server.paused():
            time.sleep(0.2)  # the stop is delivered asynchronously
            before = _cpu_ticks(pgid)
            time.sleep(1.0)
            assert _cpu_ticks(pgid) == before, "a paused group still ran"
        assert _ticks_grow(pgid, 10), "the group did not run again after the block"
    finally:
        server.stop(grace_s=5)


def test_stop_ends_a_paused_group(tmp_path):
    server = _start(tmp_path, "python3 -c 'import time; time.sleep(300)' & wait")
    pgid = server.process.pid
    with server.paused():
        t0 = time.monotonic()
        server.stop(grace_s=10)
        assert not _group_alive(pgid)
        assert time.monotonic() - t0 < 5, "the stop waited out its grace: SIGTERM held until SIGCONT"


def test_convert_steps_are_argv_lists_with_the_blocks_export_values(tmp_path):
    from cookbook.recipe import resolve

    resolved = resolve("gemma3-270m-cpu")
    base = {k: v for k, v in shell_env(tmp_path / "m.gguf").items() if k not in ("CHECKPOINT_DIR", "COOKBOOK")}
    env = exported_env(resolved, base)
    assert env["CHECKPOINT_DIR"] == ".cache/models/gemma3-270m-hf"  # ${CHECKPOINT_DIR:-...} as bash sees it
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    [step] = convert_steps(resolved, env)
    assert step.argv == convert_command() + [
        "gguf-to-hf",
        str(tmp_path / "m.gguf"),
        ".cache/models/gemma3-270m-hf",
        "--dtype",
        "bfloat16",
        "--chat-template",
        f"{env['COOKBOOK']}/recipes/gemma3-270m-cpu/chat_template.jinja",
        "--force",
    ]
    assert step.creates == Path(".cache/models/gemma3-270m-hf/chat_template.jinja")


def test_prepare_skips_steps_whose_output_exists(tmp_path, monkeypatch):
    from cookbook.recipe import resolve
    from cookbook.serving import local

    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "chat_template.jinja").write_text("{{ messages }}")
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path / "hf"))
    monkeypatch.setattr(local, "fetch", lambda resolved: tmp_path / "m.gguf")
    monkeypatch.setattr(local, "convert_command", lambda: ["false"])  # would fail if it ran
    env = local.prepare(resolve("gemma3-270m-cpu"), tmp_path)
    assert env["SOURCE_FILE"] == str(tmp_path / "m.gguf")


def test_a_caller_stopped_by_sigterm_stops_its_server_first(tmp_path):
    # As under `timeout 570 python3 benchmarks/...`: SIGTERM reaches the caller only, the server being
    # in a session of its own; the caller's finally must still stop it.
    import os
    import signal
    import sys

    pid_file = tmp_path / "pgid"
    script = (
        "import subprocess, sys, time\n"
        "from pathlib import Path\n"
        "from cookbook.serving.local import Server\n"
        "p = subprocess.Popen(['bash', '-c', 'sleep 300 & wait'], start_new_session=True)\n"
        "server = Server(p, Path(sys.argv[2]), 'http://127.0.0.1:1')\n"
        "Path(sys.argv[1]).write_text(str(p.pid))\n"
        "try:\n"
        "    time.sleep(300)\n"
        "finally:\n"
        "    server.stop(grace_s=10)\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", script, str(pid_file), str(tmp_path / "log")])
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    pgid = int(pid_file.read_text())
    assert _group_alive(pgid)
    os.kill(caller.pid, signal.SIGTERM)
    assert caller.wait(timeout=30) == 128 + signal.SIGTERM
    assert not _group_alive(pgid), "the caller exited and left its server running"
