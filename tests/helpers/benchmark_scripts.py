"""The scripts in benchmarks/ are files, not a package: load one as a module for its tests, or run it."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def path(name: str) -> Path:
    """benchmarks/NAME.py; NAME may name a subfolder ("mxfp4_moe/bench")."""
    return BENCHMARKS / f"{name}.py"


def load(name: str) -> ModuleType:
    """benchmarks/NAME.py as a module named after its file (registered in sys.modules, which its
    dataclasses need), its folder on sys.path as when it runs as a script: its siblings import by bare name."""
    file = path(name)
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    spec = importlib.util.spec_from_file_location(file.stem, file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = mod
    spec.loader.exec_module(mod)
    return mod


def env(name: str) -> dict[str, str]:
    """This environment with benchmarks/NAME.py's folder on PYTHONPATH, for a `python -c` that imports it;
    TRITON_INTERPRET left out (the instruments compile for the GPU, which the interpreter cannot)."""
    out = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(path(name).parent), out.get("PYTHONPATH")) if p)
    return out
