"""The v0.30.0 profile's claims, checked against PyPI's vllm 0.30.0 source (the vLLM
that vllm-gaudi releases/v0.30.0 runs). Only a fix whose defect shows here gets a patch;
the others are listed as provided by the glm-5-mxfp4 port (fixes/profiles/v0.30.0.yaml)."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import sys

import pytest

from cookbook.fixes import pack, tree
from cookbook.fixes.pack import FixError


@pytest.fixture(scope="module")
def v030():
    from vllm_sdist import vllm_source

    try:
        return vllm_source("0.30.0")
    except FixError as e:
        pytest.skip(f"vllm 0.30.0 sdist not available: {e}")


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


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.engine
def test_logprobs_decode_guard_on_v030_source(v030, padded_vocab_model, tmp_path):
    from vllm.tokenizers import get_tokenizer

    tok = get_tokenizer(str(padded_vocab_model))
    padded_id = len(tok) + 3  # in the model's vocab, not the tokenizer's
    rel = "tokenizers/detokenizer_utils.py"
    stock = _load(v030 / rel, "v030_detok_stock")
    with pytest.raises(TypeError, match="'NoneType' object is not iterable"):
        stock.convert_ids_list_to_tokens(tok, [padded_id])

    # The pack's patch applies exactly to the 0.30.0 tree and removes the crash.
    copy = tmp_path / "vllm"
    for r in ("_version.py", rel):
        (copy / r).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(v030 / r, copy / r)
    fixes = pack.resolve("v0.30.0", [])
    assert [f.name for f in fixes if f.provided_by == "pack"] == ["logprobs-decode-guard"]
    tree.apply("v0.30.0", [], copy)
    fixed = _load(copy / rel, "v030_detok_fixed")
    the_id = tok.convert_tokens_to_ids("\u2581the")
    assert fixed.convert_ids_list_to_tokens(tok, [padded_id, the_id]) == ["", " the"]
    sys.modules.pop("v030_detok_stock", None)
    sys.modules.pop("v030_detok_fixed", None)
