"""cookbook.offline.imports, run as the host runs it (python3 -m, the package on PYTHONPATH), on real
package folders: one whose modules all import, one with a missing library, a module that raises at
import, and a platform subpackage left out with --skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cookbook.files import repo_root


def _run(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{repo_root() / 'src'}"}
    return subprocess.run(
        [sys.executable, "-m", "cookbook.offline.imports", *args], capture_output=True, text=True, env=env
    )


def _package(tmp: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_every_module_imports(tmp_path):
    _package(tmp_path, {"model/__init__.py": "", "model/ops/__init__.py": "", "model/ops/kernel.py": "import json\n"})
    r = _run(tmp_path, "model")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3 modules of model import"


def test_a_lazily_used_missing_library_is_named(tmp_path):
    _package(
        tmp_path,
        {
            "model/__init__.py": "",
            "model/nvidia/__init__.py": "",
            "model/nvidia/compress.py": "import not_carried_dsl_xyz\n",
            "model/nvidia/broken.py": "raise RuntimeError('needs a GPU')\n",
            "model/amd/__init__.py": "import aiter_not_here_xyz\n",
            "model/amd/attn.py": "",
        },
    )
    r = _run(tmp_path, "model", "--skip", "amd")
    assert r.returncode == 1
    assert "model.nvidia.compress: no module named 'not_carried_dsl_xyz'" in r.stdout
    assert "model.nvidia.broken: RuntimeError: needs a GPU" in r.stdout
    assert "amd" not in r.stdout  # left out, not reported
    assert "2 of 4 modules of model do not import" in r.stderr and "help:" in r.stderr


def test_a_package_that_is_not_there_is_one_clear_error(tmp_path):
    r = _run(tmp_path, "no_such_package_xyz")
    assert r.returncode == 2
    assert "cannot import no_such_package_xyz" in r.stderr and "env.sh" in r.stderr
