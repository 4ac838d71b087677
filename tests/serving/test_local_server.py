"""Server.stop ends the whole process group, children included, before returning."""

import os
import subprocess
import time
from pathlib import Path

from cookbook.serving.local import Server, _group_alive, prepare_script


def _start(tmp_path: Path, script: str) -> Server:
    log = tmp_path / "log"
    proc = subprocess.Popen(["bash", "-c", script], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    time.sleep(0.5)
    return Server(proc, log, "http://127.0.0.1:1")


def test_stop_waits_for_children_that_outlive_the_shell(tmp_path):
    # The child shrugs off SIGTERM for 2 s (like an engine shutting down), the shell dies at once.
    server = _start(tmp_path, "python3 -c 'import signal,time; signal.signal(signal.SIGTERM, lambda *a: "
                              "(time.sleep(2), exit(0))); time.sleep(300)' & wait")
    pgid = server.process.pid
    t0 = time.monotonic()
    server.stop(grace_s=10)
    assert not _group_alive(pgid)
    assert time.monotonic() - t0 >= 1.5, "returned before the child finished shutting down"


def test_stop_kills_a_group_that_ignores_sigterm(tmp_path):
    server = _start(tmp_path, "trap '' TERM; python3 -c 'import signal,time; "
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)' & wait")
    pgid = server.process.pid
    server.stop(grace_s=1)
    assert not _group_alive(pgid)


def test_prepare_script_skips_steps_whose_output_exists(tmp_path):
    from cookbook.recipe import resolve

    script = prepare_script(resolve("gemma3-270m-cpu"))
    assert 'if [ -e "$CHECKPOINT_DIR/config.json" ]' in script
    assert 'cookbook convert gguf-to-hf "$SOURCE_FILE" "$CHECKPOINT_DIR" "--dtype" "bfloat16"' in script
    p = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert p.returncode == 0, p.stderr
