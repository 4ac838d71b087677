"""The vllm-0.26.0 profile's claims (the H200 recipe), checked against PyPI's vllm 0.26.0 source.

The H200 host runs that source from the wheel; here the sdist's Python files are enough to show
each defect and that the pack's patch applies to them exactly."""

from __future__ import annotations

import ast
import copy

import pytest

from cookbook.fixes import pack, tree

PROFILE = "vllm-0.26.0"


def _function(source: str | ast.AST, name: str) -> ast.FunctionDef:
    tree = ast.parse(source) if isinstance(source, str) else source
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


@pytest.fixture(scope="module")
def v026():
    from vllm_sdist import source_or_skip

    return source_or_skip("0.26.0")


def test_profile_pins_the_sources_version_and_torch(v026):
    text = (v026 / "_version.py").read_text()
    assert "__version__ = version = '0.26.0'" in text
    profile = pack.load_profile(PROFILE)
    assert tree.target_version(v026) == profile.version
    # the torch pin the profile states is the one vLLM's own requirements file pins
    cuda_reqs = (v026.parent / "requirements" / "cuda.txt").read_text()
    assert "torch==2.11.0" in cuda_reqs


def test_flashinfer_sampler_is_off_when_the_env_says_0(v026):
    """The recipe's VLLM_USE_FLASHINFER_SAMPLER=0 reaches the decision: flashinfer_sampler_supported()
    returns False on that variable before FlashInfer is imported, so its JIT never starts."""
    fn = _function(
        (v026 / "v1" / "sample" / "ops" / "topk_topp_sampler.py").read_text(), "flashinfer_sampler_supported"
    )
    body = [ast.unparse(s) for s in fn.body]
    env_check = next(i for i, s in enumerate(body) if s.startswith("if not envs.VLLM_USE_FLASHINFER_SAMPLER"))
    first_import = next(i for i, s in enumerate(body) if "import FlashInferBackend" in s)
    assert env_check < first_import
    assert "return False" in body[env_check]
    envs = (v026 / "envs.py").read_text()
    assert "VLLM_USE_FLASHINFER_SAMPLER: bool = True" in envs  # on by default: the recipe must say 0


@pytest.mark.engine
@pytest.mark.slow_tier("fixes")
def test_logprobs_decode_guard_on_v026_source(v026, padded_vocab_model, tmp_path):
    from vllm.tokenizers import get_tokenizer
    from vllm_sdist import check_logprobs_decode_guard

    check_logprobs_decode_guard(v026, PROFILE, get_tokenizer(str(padded_vocab_model)), tmp_path)


def _broadcast_of(expr: str, hc_attn_fn):
    """Evaluate one of the two expressions that derive hc_attn_fn_broadcast, on a stand-in layer."""
    import types

    layer = types.SimpleNamespace(hc_attn_fn=hc_attn_fn, hc_mult=4, hidden_size=8)
    return eval(expr, {}, {"layer": layer, "self": layer})


def test_dsv4_dummy_mhc_broadcast_on_v026_source(v026, tmp_path):
    """The defect dsv4-dummy-mhc-broadcast fixes, read off the 0.26.0 source: the first layer's forward
    asserts hc_attn_fn_broadcast, only finalize_mhc_broadcast_weights() sets it, only load_weights()
    calls that, and the dummy loader never calls load_weights(). Patched, the forward derives the same
    tensor as finalize_mhc_broadcast_weights() (both evaluated on one random hc_attn_fn)."""
    import torch
    from vllm_sdist import profile_copy

    from cookbook.fixes import tree

    model = v026 / "models" / "deepseek_v4" / "nvidia" / "model.py"
    text = model.read_text()
    assert "assert self.hc_attn_fn_broadcast is not None" in text
    stock = ast.parse(text)
    setters = [
        n
        for n in ast.walk(stock)
        if isinstance(n, ast.FunctionDef)
        and any(
            isinstance(a, ast.Assign)
            and any(ast.unparse(t).endswith("hc_attn_fn_broadcast") for t in a.targets)
            and not (isinstance(a.value, ast.Constant) and a.value.value is None)
            for a in ast.walk(n)
        )
    ]
    assert [f.name for f in setters] == ["finalize_mhc_broadcast_weights"]
    callers = {
        f.name
        for f in ast.walk(stock)
        if isinstance(f, ast.FunctionDef)
        and f.name != "finalize_mhc_broadcast_weights"
        and "finalize_mhc_broadcast_weights()" in ast.unparse(f)
    }
    assert callers == {"load_weights"}
    dummy = _function((v026 / "model_executor" / "model_loader" / "dummy_loader.py").read_text(), "load_weights")
    assert "model.load_weights" not in ast.unparse(dummy)

    copy = profile_copy(v026, PROFILE, tmp_path / "vllm")
    tree.apply(PROFILE, [], copy)
    patched = (copy / "models" / "deepseek_v4" / "nvidia" / "model.py").read_text()
    assert "assert self.hc_attn_fn_broadcast is not None" not in patched
    fix = next(
        n
        for n in ast.walk(ast.parse(patched))
        if isinstance(n, ast.If) and ast.unparse(n.test) == "self.hc_attn_fn_broadcast is None"
    )
    (assign,) = fix.body
    finalize = _function(stock, "finalize_mhc_broadcast_weights")
    (original,) = [
        a
        for a in ast.walk(finalize)
        if isinstance(a, ast.Assign) and ast.unparse(a.targets[0]).endswith("hc_attn_fn_broadcast")
    ]
    hc = torch.randn(24, 4 * 8)
    ours = _broadcast_of(ast.unparse(assign.value), hc)
    theirs = _broadcast_of(ast.unparse(original.value), hc)
    assert ours.shape == (24, 8) and torch.equal(ours, theirs)


def test_dsv4_recipe_deep_gemm_warmup_is_a_value_envs_accepts(v026):
    """dsv4-flash-perf-h200 skips DeepGEMM's start-up warm-up (1,690 shapes, 28 minutes on the H200):
    VLLM_DEEP_GEMM_WARMUP is read through env_with_choices, which refuses any other spelling at start."""
    from cookbook.recipe import resolve

    value = resolve("dsv4-flash-perf-h200").recipe.env["VLLM_DEEP_GEMM_WARMUP"].value
    envs = ast.parse((v026 / "envs.py").read_text())
    call = next(
        n
        for n in ast.walk(envs)
        if isinstance(n, ast.Call)
        and getattr(n.func, "id", "") == "env_with_choices"
        and isinstance(n.args[0], ast.Constant)
        and n.args[0].value == "VLLM_DEEP_GEMM_WARMUP"
    )
    choices = ast.literal_eval(call.args[2])
    assert value == "skip" and value in choices and "relax" == ast.literal_eval(call.args[1])


def _class(tree_: ast.AST, name: str) -> ast.ClassDef:
    return next(n for n in ast.walk(tree_) if isinstance(n, ast.ClassDef) and n.name == name)


def _required_attrs(find: ast.FunctionDef) -> set[str]:
    """The attribute names _find_first_mhc_layer's hasattr() loop requires."""
    loop = next(n for n in ast.walk(find) if isinstance(n, ast.GeneratorExp))
    return set(ast.literal_eval(loop.generators[0].iter))


def _define(source: str | ast.AST, name: str, namespace: dict, signature_only: bool = False) -> None:
    """Run one function's definition from the source into namespace, decorators (functools.cache) left
    off, and with signature_only its body too (a GPU kernel's wrapper, called for its signature)."""
    fn = copy.deepcopy(_function(source, name))  # the caller's parsed tree stays as it was
    fn.decorator_list = []
    if signature_only:
        fn.body = [ast.Pass()]
    exec(compile(ast.fix_missing_locations(ast.Module([fn], [])), name, "exec"), namespace)


def _calls(fn: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) == name]


def _split_modules(v026, monkeypatch):
    """vllm.utils.math_utils (cdiv) and the mHC kernels module (compute_num_split) from the 0.26.0
    source, on a 132-SM H200, in sys.modules for the patched warm-up's imports."""
    import sys
    import types

    kernels_src = (v026 / "model_executor" / "kernels" / "mhc" / "tilelang_kernels.py").read_text()
    math_mod = types.ModuleType("vllm.utils.math_utils")
    _define((v026 / "utils" / "math_utils.py").read_text(), "cdiv", math_mod.__dict__)
    h200 = types.SimpleNamespace(multi_processor_count=132)
    kern_mod = types.ModuleType("vllm.model_executor.kernels.mhc.tilelang_kernels")
    kern_mod.__dict__.update(
        torch=types.SimpleNamespace(cuda=types.SimpleNamespace(get_device_properties=lambda i: h200))
    )
    kern_mod.cdiv = math_mod.cdiv
    _define(kernels_src, "compute_num_split", kern_mod.__dict__)
    monkeypatch.setitem(sys.modules, "vllm.utils.math_utils", math_mod)
    monkeypatch.setitem(sys.modules, kern_mod.__name__, kern_mod)
    return math_mod, kern_mod


def test_dsv4_mhc_warmup_nvidia_on_v026_source(v026, tmp_path, monkeypatch):
    """The defect dsv4-mhc-warmup-nvidia fixes, read off the 0.26.0 source: the warm-up requires
    hc_pre and hc_post, which the NVIDIA DeepseekV4DecoderLayer neither defines nor sets, so it
    warms nothing there. Patched: it finds the NVIDIA layer; its calls pass the forward's own
    scalar arguments and keywords; and its token sizes reach every n_splits variant any token
    count up to 8192 compiles on a 132-SM H200 (by the source's own compute_num_split)."""
    import types

    from vllm_sdist import profile_copy

    from cookbook.fixes import tree

    rel = ("model_executor", "warmup", "deepseek_v4_mhc_warmup.py")
    nvidia = ast.parse((v026 / "models" / "deepseek_v4" / "nvidia" / "model.py").read_text())
    layer = _class(nvidia, "DeepseekV4DecoderLayer")
    has = {n.name for n in layer.body if isinstance(n, ast.FunctionDef)}
    has |= {
        t.attr
        for n in ast.walk(_function(layer, "__init__"))
        if isinstance(n, ast.Assign | ast.AnnAssign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Attribute) and ast.unparse(t.value) == "self"
    }
    stock = ast.parse(v026.joinpath(*rel).read_text())
    assert {"hc_pre", "hc_post"} <= _required_attrs(_function(stock, "_find_first_mhc_layer"))
    assert not {"hc_pre", "hc_post"} & has, "the NVIDIA layer has hc_pre/hc_post: the fix is upstream"

    copy = profile_copy(v026, PROFILE, tmp_path / "vllm")
    tree.apply(PROFILE, [], copy)
    patched = ast.parse(copy.joinpath(*rel).read_text())
    assert _required_attrs(_function(patched, "_find_first_mhc_layer")) <= has

    forward = _function(layer, "forward")
    warm = _function(patched, "_warmup_nvidia_layer_mhc")
    mix = next(n.value for n in ast.walk(warm) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "mix")
    for name in ("mhc_pre_broadcast_tilelang", "mhc_pre_tilelang", "mhc_fused_post_pre_tilelang"):
        theirs = _calls(forward, name)
        (ours,) = _calls(warm, name)
        assert theirs, name
        for call in theirs:
            # the five mHC scalars follow the three tensors (four, after the post-pre's x and mixes)
            first = 4 if name == "mhc_fused_post_pre_tilelang" else 1
            scalars = [ast.unparse(a).replace("self.", "layer.") for a in call.args[first + 3 : first + 8]]
            assert scalars == [ast.unparse(e) for e in mix.elts], name
            assert {k.arg for k in call.keywords} == {k.arg for k in ours.keywords if k.arg} | {
                "norm_weight",
                "norm_eps",
            }, name

    # _nvidia_split_token_sizes with the source's own compute_num_split and cdiv, on 132 SMs
    math_mod, kern_mod = _split_modules(v026, monkeypatch)
    ns: dict = {}
    _define(patched, "_nvidia_variant_key", ns)
    _define(patched, "_nvidia_split_token_sizes", ns)
    hidden, hc = 4096, 4
    split = kern_mod.compute_num_split

    def keys(n: int) -> set:
        blocks = math_mod.cdiv(n, 64)
        return {("broadcast", split(64, hidden, blocks)), ("fused", split(64, hc * hidden, blocks))}

    sizes = ns["_nvidia_split_token_sizes"](types.SimpleNamespace(hidden_size=hidden, hc_mult=hc), 8192)
    warmed = set().union(*(keys(n) for n in sizes))
    needed = set().union(*(keys(n) for n in range(17, 8193)))
    assert needed == warmed and len(sizes) < 64
    assert len({k for k in needed if k[0] == "fused"}) > 4, "a single variant would make the test vacuous"


def test_dsv4_mhc_warmup_nvidia_binds_to_the_kernels_signatures(v026, tmp_path, monkeypatch):
    """The patched _warmup_nvidia_layer_mhc run on the CPU against the 0.26.0 TileLang wrappers'
    own signatures (their bodies left out: the kernels need a GPU): each argument lands on the
    parameter of that name with the layer's value, at every token size, the broadcast one only
    when the layer has its broadcast weight."""
    import inspect
    import sys
    import types

    import torch
    from vllm_sdist import profile_copy

    from cookbook.fixes import tree

    copy = profile_copy(v026, PROFILE, tmp_path / "vllm")
    tree.apply(PROFILE, [], copy)
    patched = ast.parse((copy / "model_executor" / "warmup" / "deepseek_v4_mhc_warmup.py").read_text())
    wrappers = ast.parse((v026 / "model_executor" / "kernels" / "mhc" / "tilelang.py").read_text())
    calls: list[tuple[str, dict]] = []
    hidden, hc = 64, 4

    def stub(name: str):
        ns: dict = {"torch": torch}
        _define(wrappers, name, ns, signature_only=True)
        sig = inspect.signature(ns[name])

        def record(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            calls.append((name, dict(bound.arguments)))
            t = bound.arguments[next(iter(sig.parameters))].shape[0]
            z = torch.zeros
            if name == "mhc_pre_tilelang":
                return z(t, hc, 1), z(t, hc, hc), z(t, hidden, dtype=torch.bfloat16)
            return None

        return record

    mod = types.ModuleType("vllm.model_executor.kernels.mhc.tilelang")
    for name in ("mhc_fused_post_pre_tilelang", "mhc_pre_broadcast_tilelang", "mhc_pre_tilelang"):
        setattr(mod, name, stub(name))
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    ns: dict = {"torch": torch}
    _define(patched, "_warmup_nvidia_layer_mhc", ns)

    mix_hc = (2 + hc) * hc
    norm = types.SimpleNamespace
    layer = types.SimpleNamespace(
        hidden_size=hidden,
        hc_mult=hc,
        rms_norm_eps=1e-6,
        hc_eps=1e-5,
        hc_post_alpha=2.0,
        hc_sinkhorn_iters=20,
        attn_norm=norm(weight=torch.nn.Parameter(torch.ones(hidden)), variance_epsilon=1e-6),
        ffn_norm=norm(weight=torch.nn.Parameter(torch.ones(hidden) * 2), variance_epsilon=1e-7),
        **{f"hc_{p}_fn": torch.randn(mix_hc, hc * hidden) for p in ("attn", "ffn")},
        **{f"hc_{p}_scale": torch.randn(3) for p in ("attn", "ffn")},
        **{f"hc_{p}_base": torch.randn(mix_hc) for p in ("attn", "ffn")},
        hc_attn_fn_broadcast=torch.randn(mix_hc, hidden),
    )
    ns["_warmup_nvidia_layer_mhc"](layer, [1, 64, 320])
    assert [c[0] for c in calls] == [
        "mhc_pre_broadcast_tilelang",
        "mhc_pre_tilelang",
        "mhc_fused_post_pre_tilelang",
    ] * 3
    for name, a in calls:
        side = "ffn" if name == "mhc_fused_post_pre_tilelang" else "attn"
        for p in ("fn", "scale", "base"):
            assert a["hc_" + p if p != "fn" else p] is getattr(layer, f"hc_{side}_{p}"), (name, p)
        assert (a["rms_eps"], a["hc_pre_eps"], a["hc_sinkhorn_eps"]) == (1e-6, 1e-5, 1e-5)
        assert (a["hc_post_mult_value"], a["sinkhorn_repeat"]) == (2.0, 20)
        assert torch.equal(a["norm_weight"], getattr(layer, f"{side}_norm").weight)
        assert a["norm_eps"] == getattr(layer, f"{side}_norm").variance_epsilon
    assert [a["residual"].shape[0] for n, a in calls if n == "mhc_pre_tilelang"] == [1, 64, 320]
    assert all(a["fn_broadcast"] is layer.hc_attn_fn_broadcast for n, a in calls if n == "mhc_pre_broadcast_tilelang")
    calls.clear()
    layer.hc_attn_fn_broadcast = None
    ns["_warmup_nvidia_layer_mhc"](layer, [64])
    assert [c[0] for c in calls] == ["mhc_pre_tilelang", "mhc_fused_post_pre_tilelang"]


def test_dsv4_mhc_warmup_compiles_one_size_per_variant_on_threads(v026, tmp_path, monkeypatch):
    """The patched _compile_nvidia_variants on the CPU, its kernels left out: of the warm-up's token
    sizes it runs the first of each variant key, on worker threads side by side, with DeepGEMM's
    GEMM never entered by two threads at once and put back afterwards, also when a size fails. The
    key's small-FMA thresholds are the ones mhc_fused_post_pre_tilelang's source branches on."""
    import contextlib
    import sys
    import threading
    import time
    import types

    import torch
    from vllm_sdist import profile_copy

    from cookbook.fixes import tree

    wrappers = (v026 / "model_executor" / "kernels" / "mhc" / "tilelang.py").read_text()
    post_pre = [ast.unparse(s) for s in ast.walk(_function(wrappers, "mhc_fused_post_pre_tilelang"))]
    assert "use_small_fma = num_tokens <= 16" in post_pre
    assert "tile_n = 2 if num_tokens < 8 else 3" in post_pre

    copy_ = profile_copy(v026, PROFILE, tmp_path / "vllm")
    tree.apply(PROFILE, [], copy_)
    patched = ast.parse((copy_ / "model_executor" / "warmup" / "deepseek_v4_mhc_warmup.py").read_text())
    _, kern_mod = _split_modules(v026, monkeypatch)
    inside = {"gemm": 0, "gemm_most": 0, "warm": 0, "warm_most": 0}
    lock = threading.Lock()

    def enter(what: str, hold_s: float) -> None:
        with lock:
            inside[what] += 1
            inside[what + "_most"] = max(inside[what + "_most"], inside[what])
        time.sleep(hold_s)
        with lock:
            inside[what] -= 1

    def gemm(*args):
        enter("gemm", 0.02)

    # `import vllm.utils.deep_gemm as deep_gemm` walks vllm.utils.deep_gemm's attributes from vllm down
    vllm, utils, dg = (types.ModuleType(n) for n in ("vllm", "vllm.utils", "vllm.utils.deep_gemm"))
    vllm.utils, utils.deep_gemm, dg.tf32_hc_prenorm_gemm = utils, dg, gemm
    for module in (vllm, utils, dg):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(torch.accelerator, "synchronize", lambda: None)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(4)))
    ran: list[tuple[str, int]] = []

    def warm(layer, sizes):
        (size,) = sizes
        ran.append((threading.current_thread().name, size))
        if size == fail_at:
            raise RuntimeError("compile failed")
        for _ in range(2):  # the broadcast pre and the post-pre, each after its GEMM
            sys.modules["vllm.utils.deep_gemm"].tf32_hc_prenorm_gemm()
        enter("warm", 0.05)

    ns: dict = {"torch": torch, "_warmup_nvidia_layer_mhc": warm}
    _define(patched, "_nvidia_variant_key", ns)
    _define(patched, "_compile_nvidia_variants", ns)
    layer = types.SimpleNamespace(hidden_size=4096, hc_mult=4, hc_attn_fn=torch.zeros(1))
    sizes = [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 128, 192, 256, 320, 384, 448, 512, 1024, 2048, 4096, 8192]
    split = kern_mod.compute_num_split

    def key(n: int) -> tuple:
        blocks = -(-n // 64)
        return split(64, 4096, blocks), split(64, 4 * 4096, blocks), n <= 16, n < 8

    firsts = list({key(n): n for n in reversed(sizes)}.values())
    fail_at = None
    assert ns["_compile_nvidia_variants"](layer, sizes) == len(firsts) == len({key(n) for n in sizes})
    assert sorted(n for _, n in ran) == sorted(firsts) and len(firsts) < len(sizes)
    assert {name.split("_")[0] for name, _ in ran} == {"mhc-warmup"}
    assert inside["warm_most"] > 1, "the sizes ran one after another"
    assert inside["gemm_most"] == 1
    assert dg.tf32_hc_prenorm_gemm is gemm

    ran.clear()
    fail_at = 8
    with pytest.raises(RuntimeError, match="compile failed"):
        ns["_compile_nvidia_variants"](layer, sizes)
    assert dg.tf32_hc_prenorm_gemm is gemm
    assert ns["_compile_nvidia_variants"](layer, [64]) == 0  # one variant: nothing to run side by side
