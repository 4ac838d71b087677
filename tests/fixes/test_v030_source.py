"""The v0.30.0 profile's claims, checked against PyPI's vllm 0.30.0 source (the vLLM
that vllm-gaudi releases/v0.30.0 runs). Only a fix whose defect shows here gets a patch;
the others are listed as provided by the glm-5-mxfp4 port (fixes/profiles/v0.30.0.yaml)."""

from __future__ import annotations

import ast

import pytest

from cookbook.fixes import pack, tree


@pytest.fixture(scope="module")
def v030():
    from vllm_sdist import source_or_skip

    return source_or_skip("0.30.0")


def test_pin_is_the_gaudi_images_vllm(v030):
    text = (v030 / "_version.py").read_text()
    assert "__version__ = version = '0.30.0'" in text
    assert "commit_id = 'gced6857af'" in text  # seed 002: "vLLM ced6857a"
    assert tree.target_version(v030) == pack.load_profile("v0.30.0").version


def test_long_prefill_share_is_not_a_vllm_feature(v030):
    hits = [p for p in v030.rglob("*.py") if "LONG_PREFILL_SHARE" in p.read_text(errors="replace")]
    assert hits == []
    info = {f.name: f for f in pack.resolve("v0.30.0", ["vllm-long-prefill-share"])}
    assert info["vllm-long-prefill-share"].provided_by == "port glm-5-mxfp4"


def test_gather_logprobs_already_returns_int32_ids(v030):
    mod = ast.parse((v030 / "v1" / "sample" / "sampler.py").read_text())
    fn = next(n for n in ast.walk(mod) if isinstance(n, ast.FunctionDef) and n.name == "gather_logprobs")
    casts = [ast.unparse(n) for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith(".to")]
    assert "indices.to(torch.int32)" in casts
    assert {f.name: f for f in pack.resolve("v0.30.0", [])}["gather-logprobs-int32"].provided_by != "pack"


@pytest.mark.engine
@pytest.mark.slow_tier("fixes")
def test_logprobs_decode_guard_on_v030_source(v030, padded_vocab_model, tmp_path):
    from vllm.tokenizers import get_tokenizer
    from vllm_sdist import check_logprobs_decode_guard

    check_logprobs_decode_guard(v030, "v0.30.0", get_tokenizer(str(padded_vocab_model)), tmp_path)
