"""dummy-checkpoint on the packaged Gemma GGUF and the DeepSeek-V3 perf recipe's config: what vLLM's
--load-format dummy reads (config.json, tokenizer) is there and loads with transformers."""

from __future__ import annotations

import json
import subprocess

import pytest

from cookbook.convert.dummy_checkpoint import make_dummy_checkpoint
from cookbook.files import repo_root
from cookbook.gguf.errors import GGUFError

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

CONFIG = repo_root() / "recipes" / "dsv3-perf-h200" / "config.json"


@pytest.fixture(scope="module")
def dummy(tmp_path_factory, gemma_gguf):
    out = tmp_path_factory.mktemp("d") / "dsv3"
    return out, make_dummy_checkpoint(gemma_gguf, CONFIG, out)


def test_config_and_tokenizer_load_as_deepseek_v3(dummy):
    out, info = dummy
    cfg = transformers.AutoConfig.from_pretrained(out)
    assert type(cfg).__name__ == "DeepseekV3Config"
    assert (cfg.num_hidden_layers, cfg.n_routed_experts, cfg.num_experts_per_tok, cfg.kv_lora_rank) == (6, 256, 8, 512)
    tok = transformers.AutoTokenizer.from_pretrained(out)
    assert len(tok) <= cfg.vocab_size == info["vocab_size"]
    ids = tok("The quick brown fox").input_ids
    assert ids[0] == cfg.bos_token_id == tok.bos_token_id  # BOS ids taken from the GGUF, not the config file
    assert not list(out.glob("*.safetensors"))  # no weights: vLLM makes them


def test_vocabulary_smaller_than_the_tokenizer_is_refused(tmp_path, gemma_gguf):
    cfg = json.loads(CONFIG.read_text())
    cfg["vocab_size"] = 129280  # DeepSeek-V3's own: Gemma's ids run to 262143
    small = tmp_path / "config.json"
    small.write_text(json.dumps(cfg))
    with pytest.raises(GGUFError, match="smaller than the tokenizer's 262144 tokens") as e:
        make_dummy_checkpoint(gemma_gguf, small, tmp_path / "out")
    assert "vocab_size" in str(e.value) and not (tmp_path / "out").exists()


def test_not_a_config_is_refused_through_the_tool(tmp_path, gemma_gguf):
    bad = tmp_path / "config.json"
    bad.write_text('{"vocab_size": 10}')
    tool = repo_root() / "tools" / "convert" / "dummy-checkpoint"
    r = subprocess.run([str(tool), str(gemma_gguf), str(bad), str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode == 2
    assert "architectures" in r.stderr and "Traceback" not in r.stderr
