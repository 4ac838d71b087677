"""The vllm-0.26.0 profile's claims (the H200 recipe), checked against PyPI's vllm 0.26.0 source.

The H200 host runs that source from the wheel; here the sdist's Python files are enough to show
each defect and that the pack's patch applies to them exactly."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import sys

import pytest

from cookbook.fixes import pack, tree
from cookbook.fixes.pack import FixError

PROFILE = "vllm-0.26.0"


@pytest.fixture(scope="module")
def v026():
    from vllm_sdist import vllm_source

    try:
        return vllm_source("0.26.0")
    except FixError as e:
        pytest.skip(f"vllm 0.26.0 sdist not available: {e}")


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
    mod = ast.parse((v026 / "v1" / "sample" / "ops" / "topk_topp_sampler.py").read_text())
    fn = next(n for n in ast.walk(mod) if isinstance(n, ast.FunctionDef) and n.name == "flashinfer_sampler_supported")
    body = [ast.unparse(s) for s in fn.body]
    env_check = next(i for i, s in enumerate(body) if s.startswith("if not envs.VLLM_USE_FLASHINFER_SAMPLER"))
    first_import = next(i for i, s in enumerate(body) if "import FlashInferBackend" in s)
    assert env_check < first_import
    assert "return False" in body[env_check]
    envs = (v026 / "envs.py").read_text()
    assert "VLLM_USE_FLASHINFER_SAMPLER: bool = True" in envs  # on by default: the recipe must say 0


@pytest.mark.engine
def test_logprobs_decode_guard_on_v026_source(v026, padded_vocab_model, tmp_path):
    from vllm.tokenizers import get_tokenizer

    tok = get_tokenizer(str(padded_vocab_model))
    padded_id = len(tok) + 3  # in the model's vocab, not the tokenizer's
    rel = "tokenizers/detokenizer_utils.py"
    stock = _load(v026 / rel, "v026_detok_stock")
    with pytest.raises(TypeError, match="'NoneType' object is not iterable"):
        stock.convert_ids_list_to_tokens(tok, [padded_id])

    copy = tmp_path / "vllm"
    for r in ("_version.py", rel):
        (copy / r).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(v026 / r, copy / r)
    assert [f.name for f in pack.resolve(PROFILE, [])] == ["logprobs-decode-guard"]
    tree.apply(PROFILE, [], copy)
    fixed = _load(copy / rel, "v026_detok_fixed")
    the_id = tok.convert_tokens_to_ids("\u2581the")
    assert fixed.convert_ids_list_to_tokens(tok, [padded_id, the_id]) == ["", " the"]
    sys.modules.pop("v026_detok_stock", None)
    sys.modules.pop("v026_detok_fixed", None)
