"""The pinned CPU engine: located and versioned without importing vllm."""

import subprocess

import pytest

from cookbook import engine


def test_engine_python_is_an_interpreter():
    py = engine.engine_python()
    out = subprocess.run(
        [str(py), "-c", "import sys; print(sys.version_info[0])"], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "3"


def test_engine_version_missing_interpreter_is_none(monkeypatch, tmp_path):
    monkeypatch.setenv("COOKBOOK_ENGINE_PYTHON", str(tmp_path / "no-python"))
    assert engine.engine_version() is None
    assert engine.engine_installed() is False


def test_engine_module_does_not_import_vllm():
    code = "import sys, cookbook.engine as e; e.engine_version(); print('vllm' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([str(engine.engine_python()), "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.engine
def test_pinned_engine_versions():
    assert engine.engine_version() == engine.pin().version
    assert engine.torch_version() == engine.pin().torch
    vdir = engine.vllm_package_dir()
    assert vdir is not None and (vdir / "entrypoints" / "openai" / "api_server.py").is_file()


@pytest.mark.engine
def test_torchvision_removed_beside_cpu_torch():
    # PyPI's torchvision breaks beside torch 2.13.0+cpu; setup-engine removes it.
    code = "import importlib.util as u; print(u.find_spec('torchvision') is None)"
    out = subprocess.run([str(engine.engine_python()), "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
