"""The plugin inside real vLLM 0.26.0 on an sm_90 GPU (skipped elsewhere): one DeepSeek-V4-Flash MoE layer.

The layer is vLLM's own: `FusedMoE` with the FP8 config storing experts as MXFP4 (`store_dtype
"mxfp4"`, what DeepseekV4FP8Config returns for `expert_dtype "fp4"`), so the quant method is
`Mxfp4MoEMethod`, patched by the plugin; vLLM picks its sm_90 backend (Marlin) itself. Both paths
run on the same weights: the patched `apply` and the original one (`__wrapped__`).

Tolerance: ||ours - vLLM's|| / ||vLLM's|| <= 1e-2, the kernel's stated bound against a float64
reference (kernels/mxfp4-moe/README.md: measured 2.2-2.4e-3 for ours, 3.7e-3 for vLLM's kernels).
"""

import pytest

torch = pytest.importorskip("torch")
vllm = pytest.importorskip(
    "vllm", reason="vLLM is not installed (source the env.sh that scripts/offline-gpu/receive.py --installed prints)"
)
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("the plugin runs on an sm_90 GPU (H200)", allow_module_level=True)
if vllm.__version__.split("+")[0] != "0.26.0":
    pytest.skip(f"the plugin patches vLLM 0.26.0, this is {vllm.__version__}", allow_module_level=True)

import benchmark_scripts  # noqa: E402

from cookbook.kernels.mxfp4_moe import prepare_experts  # noqa: E402
from cookbook.kernels.mxfp4_moe.reference import moe_torch, rel_error  # noqa: E402
from cookbook.vllm_plugin import mxfp4_moe  # noqa: E402

layer_bench = benchmark_scripts.load("mxfp4_moe/layer_bench")

TOL = 1e-2
LIMIT = layer_bench.LIMIT


@pytest.fixture(scope="module")
def layer():
    return layer_bench.dsv4_layer()


def _both(layer, tokens, seed, scale=1.0, experts=layer_bench.E):
    routed, _, cls = layer
    xs = layer_bench.routing(tokens, seed, scale, experts)
    fns = layer_bench.paths(routed, cls)
    ours, theirs = fns["ours"](*xs), fns["vllm"](*xs)
    torch.cuda.synchronize()
    return ours, theirs, xs


def test_load_repacks_the_experts_once_into_the_frag_layout(layer):
    routed, raw, _ = layer
    st = getattr(routed, mxfp4_moe.STATE)
    assert st.variant == "dsv4" and st.max_tokens == 64 and st.swiglu_limit == LIMIT
    want = prepare_experts(*raw)
    for got, exp in zip((st.w13, st.w13_scales, st.w2, st.w2_scales), want, strict=True):
        assert got.shape == exp.shape and got.dtype == torch.uint8 and torch.equal(got, exp)
    assert not torch.equal(st.w13, raw[0])  # a real permutation, not the loaded bytes
    assert st.scale_max == int(max(raw[1].max(), raw[3].max()))
    # vLLM kept its own (converted) experts for the batches above the table
    assert routed.quant_method.moe_kernel is not None


@pytest.mark.parametrize("tokens", [1, 4, 16, 64])
@pytest.mark.parametrize("scale", [1.0, 30.0], ids=["plain", "clamped"])
def test_forward_equals_vllms_within_the_kernels_tolerance(layer, tokens, scale, monkeypatch):
    calls = []
    real = mxfp4_moe.forward
    monkeypatch.setattr(mxfp4_moe, "forward", lambda *a: calls.append(1) or real(*a))
    ours, theirs, _ = _both(layer, tokens, 10 + tokens, scale)
    assert calls == [1]  # our kernel ran
    err = rel_error(ours.float().cpu().numpy(), theirs.float().cpu().numpy())
    assert 0 < err <= TOL, f"T={tokens}: ours vs vLLM's {err:.2e}"


@pytest.mark.parametrize("tokens", [16, 64])
def test_a_batch_on_a_few_experts_equals_vllms_too(layer, tokens):
    """Dozens of tokens on each expert, as the dummy routing bias gives a served batch (layer_bench's
    concentrated rows time this): the align step's blocks fill up, the same sums come out."""
    ours, theirs, xs = _both(layer, tokens, 20 + tokens, experts=layer_bench.CONCENTRATED)
    assert int(xs[2].unique().numel()) <= layer_bench.CONCENTRATED
    err = rel_error(ours.float().cpu().numpy(), theirs.float().cpu().numpy())
    assert 0 < err <= TOL, f"T={tokens} on {layer_bench.CONCENTRATED} experts: ours vs vLLM's {err:.2e}"


def test_the_clamp_is_what_both_paths_compute(layer):
    """At x scale 30 the gate and up sums pass the limit 10: both paths match the clamped float32
    reference, and the unclamped one is far from both."""
    routed, raw, _ = layer
    ours, theirs, (x, w, ids) = _both(layer, 2, 5, 30.0)
    ref = moe_torch(x, *raw, w, ids, swiglu_limit=LIMIT)
    plain = moe_torch(x, *raw, w, ids)
    for out in (ours, theirs):
        assert rel_error(out.float().cpu().numpy(), ref.cpu().numpy()) <= TOL
    assert rel_error(plain.cpu().numpy(), ref.cpu().numpy()) > 10 * TOL


@pytest.mark.parametrize("tokens", [65, 128, 512])
def test_above_the_table_it_falls_back_to_vllms_own_path(layer, tokens, monkeypatch):
    calls = []
    monkeypatch.setattr(mxfp4_moe, "forward", lambda *a: calls.append(1))
    ours, theirs, _ = _both(layer, tokens, 20 + tokens)
    assert calls == []
    assert torch.equal(ours, theirs)  # the same kernel on the same input: the same bits


def test_an_expert_map_or_weights_on_the_input_fall_back(layer, monkeypatch):
    routed, _, _ = layer
    assert mxfp4_moe.takes(routed)
    monkeypatch.setattr(routed, "apply_router_weight_on_input", True)
    assert not mxfp4_moe.takes(routed)
