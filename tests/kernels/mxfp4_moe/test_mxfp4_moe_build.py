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


def test_the_hpu_backend_says_it_is_not_here_and_builds_nothing(tmp_path):
    out = tmp_path / "glm.json"
    r = _run("--backend", "hpu", "--variant", "glm", "--out", str(out))
    assert r.returncode == 2 and r.stdout == "" and not out.exists()
    assert "the mxfp4-moe hpu backend (MXFP4 MoE kernels for Intel Gaudi) is not in this repository" in r.stderr
    assert "kernels/mxfp4-moe/hpu/" in r.stderr and "does not run on gaudi2" in r.stderr
    assert "E=256" not in r.stderr and "Traceback" not in r.stderr  # no sm90 table in its place


def test_an_unknown_backend_is_refused_with_the_list():
    r = _run("--backend", "sm100", "--variant", "glm")
    assert r.returncode == 2 and "--backend 'sm100' is not a backend of mxfp4-moe" in r.stderr
    assert "help: use one of: sm90, hpu" in r.stderr


def test_the_sm90_backend_is_the_default():
    a, b = _run("--variant", "dsv4"), _run("--backend", "sm90", "--variant", "dsv4")
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
