"""kernels/mxfp4-moe/build.sh: variant validation and the table it prints/writes (no torch needed)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "kernels" / "mxfp4-moe" / "build.sh"


def _run(*args, env_extra=None):
    import os
    env = {**os.environ, "PYTHON": sys.executable, **(env_extra or {})}
    return subprocess.run([str(BUILD), *args], capture_output=True, text=True, env=env, timeout=60)


def test_unknown_variant_is_refused_with_help():
    r = _run("--variant", "glm5")
    assert r.returncode == 2
    assert "--variant 'glm5' is not a known model family" in r.stderr and "help: use one of: dsv4, glm, k3" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_writes_and_prints_the_table_the_kernel_loads(tmp_path):
    out = tmp_path / "sub" / "glm.json"
    r = _run("--variant", "glm", "--out", str(out))
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    assert json.loads(out.read_text()) == printed
    shipped = json.loads((ROOT / "src/cookbook/kernels/mxfp4_moe/configs/glm.json").read_text())
    assert printed["configs"] == shipped["configs"]
    assert printed["shapes"]["hidden"] == 6144 and printed["shapes"]["top_k"] == 8
    assert "GLM-5.2: E=256 H=6144 I=2048 top-8" in r.stderr


def test_a_broken_override_table_names_the_file(tmp_path):
    bad = tmp_path / "k3.json"
    bad.write_text('{"schema": "cookbook.mxfp4-moe.config/1", "variant": "k3", "configs": {"4": {"block_k1": 96}}}')
    r = _run("--variant", "k3", env_extra={"COOKBOOK_MXFP4_MOE_CONFIG": str(bad)})
    assert r.returncode == 2
    assert f"{bad}: configs[4]: block_k1 must be a power of two" in r.stderr
