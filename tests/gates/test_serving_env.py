"""A bundle records the serving environment variables the recipe does not set (issue 46)."""

import json

from click.testing import CliRunner
from openai_standin import gate_standin

from cookbook.cli import main
from cookbook.gates.bundle import serving_env


def test_serving_env_keeps_serving_variables_the_recipe_does_not_set():
    env = {
        "VLLM_USE_V1": "1",
        "NCCL_P2P_LEVEL": "SYS",
        "HF_TOKEN": "hf_secret",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "HOME": "/root",
        "PATH": "/bin",
        "VLLM_SET_BY_RECIPE": "x",
    }
    got = serving_env(env, {"VLLM_SET_BY_RECIPE"})
    assert got == {"CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "<set>", "NCCL_P2P_LEVEL": "SYS", "VLLM_USE_V1": "1"}


def test_gates_run_writes_the_serving_env_into_the_bundle_standin(recipes_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_ATTENTION_BACKEND", "FLASHINFER")
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "secret")
    url, server = gate_standin("gemma3-270m")
    try:
        out = tmp_path / "b"
        res = CliRunner().invoke(
            main, ["gates", "run", "gates-cpu", "--base-url", url, "--only", "greedy", "--out", str(out)]
        )
    finally:
        server.shutdown()
        server.server_close()
    doc = json.loads((out / "results.json").read_text())
    assert doc["gates"]["greedy"]["status"] == "passed", res.output
    # the run records what the server reported of its own configuration
    assert doc["server_reported"]["max_model_len"] == 10240
    variables = doc["serving_env"]["variables"]
    assert variables["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"
    assert variables["HUGGING_FACE_HUB_TOKEN"] == "<set>" and "secret" not in (out / "results.json").read_text()
