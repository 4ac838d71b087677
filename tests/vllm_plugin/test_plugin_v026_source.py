"""What the plugin assumes of vLLM 0.26.0, checked against PyPI's vllm 0.26.0 source (no GPU, no install).

The plugin wraps methods by name and passes arguments by position; vLLM calls them by keyword.
A release that renamed a parameter, moved a class or changed what selects Mxfp4MoEMethod would
break it silently on the GPU; here it fails by name.
"""

from __future__ import annotations

import ast

import pytest


@pytest.fixture(scope="module")
def v026():
    from vllm_sdist import source_or_skip

    return source_or_skip("0.26.0")


def _classes(path) -> dict[str, ast.ClassDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}


def _params(cls: ast.ClassDef, method: str) -> list[str]:
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == method)
    return [a.arg for a in fn.args.args]


def test_the_wrapped_methods_have_the_parameters_the_wrappers_take(v026):
    cls = _classes(v026 / "model_executor/layers/quantization/mxfp4.py")
    m = cls["Mxfp4MoEMethod"]
    assert _params(m, "__init__") == ["self", "moe"]
    assert _params(m, "process_weights_after_loading") == ["self", "layer"]
    assert _params(m, "apply") == [
        "self",
        "layer",
        "x",
        "topk_weights",
        "topk_ids",
        "shared_experts",
        "shared_experts_input",
    ]
    assert _params(cls["GptOssMxfp4MoEMethod"], "__init__") == ["self", "moe"]


def test_vllm_calls_apply_by_those_keywords(v026):
    src = (v026 / "model_executor/layers/fused_moe/routed_experts.py").read_text()
    call = src[src.index("return self.quant_method.apply(") :].split(")", 1)[0]
    for kw in ("layer=self", "x=x", "topk_weights=topk_weights", "topk_ids=topk_ids"):
        assert kw in call
    assert "shared_experts=shared_experts" in call and "shared_experts_input=shared_experts_input" in call


def test_what_the_plugin_reads_from_the_layer_and_its_config_exists(v026):
    cfg = _classes(v026 / "model_executor/layers/fused_moe/config.py")["FusedMoEConfig"]
    fields = {n.target.id for n in cfg.body if isinstance(n, ast.AnnAssign)}
    need = {"activation", "has_bias", "swiglu_limit", "swiglu_alpha", "swiglu_beta", "in_dtype", "num_experts"}
    need |= {"hidden_dim", "experts_per_token", "intermediate_size_per_partition", "moe_parallel_config"}
    assert need <= fields
    routed = (v026 / "model_executor/layers/fused_moe/routed_experts.py").read_text()
    for attr in ("self.layer_name = ", "self.swiglu_limit = ", "self.apply_router_weight_on_input = "):
        assert attr in routed
    assert "def expert_map(self)" in routed
    shared = _classes(v026 / "model_executor/layers/fused_moe/runner/shared_experts.py")["SharedExpertsOrder"]
    assert "MK_INTERNAL_OVERLAPPED" in {t.id for n in shared.body if isinstance(n, ast.Assign) for t in n.targets}


def test_deepseek_v4s_fp8_config_selects_mxfp4moemethod_for_fp4_experts(v026):
    qc = (v026 / "models/deepseek_v4/quant_config.py").read_text()
    fp4 = qc[qc.index('if self.expert_dtype == "fp4":') :]
    assert "return Mxfp4MoEMethod(layer.moe_config)" in fp4.split("return super().get_quant_method", 1)[0]
    assert 'model_type == "deepseek_v4"' in qc and '"deepseek_v4_fp8"' in qc
    fp8 = (v026 / "model_executor/layers/quantization/fp8.py").read_text()
    assert 'if self.store_dtype == "mxfp4":' in fp8


def test_the_dummy_loader_leaves_integer_tensors_alone_so_the_plugin_fills_the_experts(v026):
    src = (v026 / "model_executor/model_loader/weight_utils.py").read_text()
    body = src[src.index("def initialize_single_dummy_weight(") :]
    assert "if not torch.is_floating_point(param):" in body.split("if current_platform.is_tpu():", 1)[0]


def test_deepseek_v4_clamps_its_experts_as_the_kernel_does(v026):
    act = (v026 / "model_executor/layers/activation.py").read_text()
    native = act[act.index("class SiluAndMulWithClamp") :]
    native = native[native.index("def forward_native") :].split("def forward_cuda", 1)[0]
    assert "torch.clamp(x[..., :d], max=self.swiglu_limit)" in native  # the gate: an upper bound only
    assert "torch.clamp(x[..., d:], min=-self.swiglu_limit, max=self.swiglu_limit)" in native
    model = (v026 / "models/deepseek_v4/nvidia/model.py").read_text()
    assert "swiglu_limit=self.swiglu_limit," in model[model.index("self.experts = FusedMoE(") :]


def test_the_server_sets_up_the_moe_workspace_that_the_layer_bench_sets_up_itself(v026):
    # Outside a server, vLLM's modular MoE kernels fail with "WorkspaceManager not initialized"
    # (seen on the H200); layer_bench calls what the GPU worker calls, with the same signature.
    runner = (v026 / "v1/worker/gpu_worker.py").read_text(encoding="utf-8")
    assert "init_workspace_manager(" in runner
    fn = next(
        n
        for n in ast.walk(ast.parse((v026 / "v1/worker/workspace.py").read_text(encoding="utf-8")))
        if isinstance(n, ast.FunctionDef) and n.name == "init_workspace_manager"
    )
    assert [a.arg for a in fn.args.args][:1] == ["device"]
    assert "_manager is not None" in (v026 / "v1/worker/workspace.py").read_text(encoding="utf-8")


def test_the_routing_bias_the_dummy_fill_zeroes_is_the_one_the_router_reads(v026):
    """balance_dummy_routing zeroes RoutedExperts.e_score_correction_bias in place: DeepSeek-V4 hands the
    gate's own tensor to FusedMoE, which hands it to its router and to RoutedExperts, which keeps it."""
    model = (v026 / "models/deepseek_v4/nvidia/model.py").read_text()
    assert "e_score_correction_bias=self.gate.e_score_correction_bias," in model
    layer = (v026 / "model_executor/layers/fused_moe/layer.py").read_text()
    assert layer.count("e_score_correction_bias=e_score_correction_bias,") >= 2  # router and RoutedExperts
    routed = (v026 / "model_executor/layers/fused_moe/routed_experts.py").read_text()
    assert "self.e_score_correction_bias = e_score_correction_bias" in routed


def test_dummy_weights_are_the_range_the_routing_model_assumes(v026):
    import benchmark_scripts

    tree = ast.parse((v026 / "model_executor/model_loader/weight_utils.py").read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "initialize_dummy_weights")
    defaults = dict(zip([a.arg for a in fn.args.args][-len(fn.args.defaults) :], fn.args.defaults, strict=True))
    dummy = benchmark_scripts.load("dummy_routing").DUMMY
    assert (ast.literal_eval(defaults["low"]), ast.literal_eval(defaults["high"])) == (-dummy, dummy)
