"""The vLLM plugin's switch, entry point and refusals, on a machine without a GPU.

The refusals are plain functions of the facts the plugin reads from vLLM (cookbook.vllm_plugin.checks);
`register` itself runs in a fresh interpreter, where vLLM is absent (blocked) or, when the pinned CPU
vLLM is installed, the real one, whose version the plugin refuses.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from cookbook.errors import BAD_INPUT, CookbookError
from cookbook.vllm_plugin import ENV_DUMMY_EXPERTS, ENV_ENABLE, checks

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "cookbook"


def _register(env_extra: dict, block_vllm: bool) -> subprocess.CompletedProcess:
    """register() in a fresh interpreter; prints the plugin modules loaded, or the refusal."""
    code = (
        "import sys, json\n"
        + ("sys.modules['vllm'] = None\n" if block_vllm else "")
        + "from cookbook.errors import CookbookError\n"
        "from cookbook.vllm_plugin import register\n"
        "try:\n"
        "    register()\n"
        "except CookbookError as e:\n"
        "    print(e.render()); sys.exit(e.exit_code)\n"
        "mods = [m for m, v in sys.modules.items() if v is not None]\n"
        "print(json.dumps(sorted(m for m in mods if m.startswith(('cookbook.vllm_plugin', 'vllm', 'torch')))))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (ENV_ENABLE, ENV_DUMMY_EXPERTS)}
    return subprocess.run([sys.executable, "-c", code], env={**env, **env_extra}, capture_output=True, text=True)


def test_the_entry_point_is_declared_and_names_register():
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["vllm.general_plugins"]
    assert eps == {"cookbook_mxfp4_moe": "cookbook.vllm_plugin:register"}
    from cookbook.vllm_plugin import register

    assert callable(register)


@pytest.mark.parametrize("value", [None, "0", "", "yes"])
def test_without_the_switch_register_imports_nothing(value):
    res = _register({} if value is None else {ENV_ENABLE: value}, block_vllm=True)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[-1]) == ["cookbook.vllm_plugin"]  # no vLLM, no torch, no patch


@pytest.mark.parametrize("env", [{ENV_ENABLE: "1"}, {ENV_DUMMY_EXPERTS: "1"}])
def test_switched_on_without_vllm_it_refuses_with_one_message(env):
    res = _register(env, block_vllm=True)
    assert res.returncode == BAD_INPUT
    assert res.stdout.splitlines() == [
        "error: cookbook's MXFP4 MoE plugin: vLLM is not installed in this environment",
        f"  help: {checks.OFF}",
    ]
    assert "Traceback" not in res.stderr


@pytest.mark.engine
def test_switched_on_under_the_cpu_engine_it_refuses_its_version():
    from vllm import __version__

    res = _register({ENV_ENABLE: "1"}, block_vllm=False)
    assert res.returncode == BAD_INPUT, res.stdout + res.stderr
    assert f"patches vLLM 0.26.0's Mxfp4MoEMethod; this is vLLM {__version__}" in res.stdout


@pytest.mark.parametrize("version", ["0.32.0", "0.25.1", "0.26.1", "0.26.0rc1"])
def test_another_engine_version_is_refused_naming_both(version):
    with pytest.raises(checks.PluginRefusal) as exc:
        checks.check_engine(version)
    assert f"this is vLLM {version}" in str(exc.value) and "vllm==0.26.0" in exc.value.help


def test_the_pinned_engine_passes_with_or_without_a_local_tag():
    checks.check_engine("0.26.0")
    checks.check_engine("0.26.0+cu130")


@pytest.mark.parametrize(
    "is_cuda,cap,name,where",
    [
        (False, None, None, "no CUDA GPU"),
        (True, None, None, "no GPU"),
        (True, (8, 0), "NVIDIA A100", "NVIDIA A100 sm_80"),
        (True, (10, 0), "NVIDIA B200", "NVIDIA B200 sm_100"),
        (True, (12, 0), None, "GPU sm_120"),
    ],
)
def test_a_gpu_other_than_hopper_is_refused_saying_what_it_is(is_cuda, cap, name, where):
    with pytest.raises(checks.PluginRefusal) as exc:
        checks.check_gpu(is_cuda, cap, name)
    msg = str(exc.value)
    assert msg.endswith(f"this machine has {where}\n  help: {checks.OFF}")
    assert "sm_90" in msg and isinstance(exc.value, CookbookError) and exc.value.exit_code == BAD_INPUT


def test_the_h200_passes():
    checks.check_gpu(True, (9, 0), "NVIDIA H200")


@pytest.mark.parametrize(
    "kwargs,problem",
    [
        ({"activation": "swigluoai"}, "activation 'swigluoai'"),
        ({"activation": "gelu"}, "activation 'gelu'"),
        ({"has_bias": True}, "expert biases"),
        ({"swiglu_alpha": 1.702, "swiglu_beta": 1.0}, "alpha 1.702 and beta 1.0"),
        ({"in_dtype": "float16"}, "float16 activations"),
    ],
)
def test_an_unsupported_activation_is_refused_naming_the_models_it_cannot_serve(kwargs, problem):
    facts = {"activation": "silu", "has_bias": False, **kwargs}
    with pytest.raises(checks.PluginRefusal) as exc:
        checks.check_experts(**facts)
    msg = exc.value.format_message()
    assert problem in msg
    assert "cannot serve gpt-oss (GptOssMxfp4MoEMethod" in msg and "alpha 1.702, clamp 7" in msg
    assert msg.count("\n") == 0 and exc.value.help == checks.OFF


def test_deepseek_v4_experts_pass():
    checks.check_experts("silu", False, None, None, "bfloat16")


def test_gpt_oss_is_refused_by_name():
    with pytest.raises(checks.PluginRefusal, match=r"cannot serve gpt-oss \(GptOssMxfp4MoEMethod"):
        checks.refuse_gpt_oss()


@pytest.mark.parametrize("tp,ep,a2a", [(2, 1, False), (1, 8, False), (1, 1, True)])
def test_split_experts_are_refused(tp, ep, a2a):
    with pytest.raises(checks.PluginRefusal, match="runs the whole expert set on one GPU"):
        checks.check_parallel(tp, ep, a2a)


def test_a_shape_without_a_tuned_table_is_refused_and_the_tuned_ones_are_found():
    assert checks.variant_for(256, 4096, 2048, 6) == "dsv4"
    assert checks.variant_for(256, 6144, 2048, 8) == "glm"
    with pytest.raises(checks.PluginRefusal) as exc:
        checks.variant_for(128, 2880, 2880, 4)  # gpt-oss-120b's experts
    assert "E=128, H=2880, I=2880, top-4" in str(exc.value) and "dsv4 (E=256, H=4096, I=2048, top-6)" in str(exc.value)


def _vllm_importers():
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            if any(n == "vllm" or n.startswith("vllm.") for n in names):
                yield path.relative_to(SRC).as_posix()


def test_only_the_plugin_imports_vllm():
    assert set(_vllm_importers()) == {"vllm_plugin/mxfp4_moe.py"}
