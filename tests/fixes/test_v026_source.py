"""The vllm-0.26.0 profile's claims (the H200 recipe), checked against PyPI's vllm 0.26.0 source.

The H200 host runs that source from the wheel; here the sdist's Python files are enough to show
each defect and that the pack's patch applies to them exactly."""

from __future__ import annotations

import ast

import pytest

from cookbook.fixes import pack, tree

PROFILE = "vllm-0.26.0"


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
    from vllm_sdist import check_logprobs_decode_guard

    check_logprobs_decode_guard(v026, PROFILE, get_tokenizer(str(padded_vocab_model)), tmp_path)
