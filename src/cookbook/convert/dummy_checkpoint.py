"""dummy-checkpoint: an architecture with no weights, for vLLM's `--load-format dummy`.

Performance recipes measure an architecture (its attention, its experts, its routing), not a
model: vLLM builds the network from config.json and fills the weights with random values.
What it still needs is a config and a tokenizer. The config is the recipe's own file (a public
model's config with fewer layers); the tokenizer comes from a GGUF's metadata, built by the same
code as gguf-to-hf, so no tokenizer download is needed. The config's vocabulary must hold every
token id the tokenizer can produce.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cookbook import model_folder
from cookbook.convert.gguf_to_hf import ARCHS, _require_libraries, write_tokenizer
from cookbook.gguf.errors import GGUFError
from cookbook.gguf.reader import read_gguf
from cookbook.untrusted import open_regular

MAX_CONFIG_BYTES = 1 << 20


def _read_config(path: Path) -> dict:
    with os.fdopen(open_regular(path), "rb") as f:
        raw = f.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise GGUFError(f"larger than {MAX_CONFIG_BYTES} bytes; not a model config", path=path)
    try:
        config = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise GGUFError(f"not JSON ({exc})", path=path) from None
    if not isinstance(config, dict) or not isinstance(config.get("architectures"), list):
        raise GGUFError("a model config needs an `architectures` list", path=path, field="architectures")
    if not isinstance(config.get("vocab_size"), int) or config["vocab_size"] < 1:
        raise GGUFError("vocab_size must be a positive integer", path=path, field="vocab_size")
    return config


def make_dummy_checkpoint(tokenizer_gguf, config_file, out_dir, *, force: bool = False) -> dict:
    """config.json from `config_file`, tokenizer files from `tokenizer_gguf`, into `out_dir`."""
    config_file, out_dir = Path(config_file), Path(out_dir)
    model_folder.check(out_dir)
    config = _read_config(config_file)
    g = read_gguf(tokenizer_gguf)
    arch = g.get("general.architecture")
    if arch not in ARCHS or "tokenizer.ggml.tokens" not in g.fields:
        raise GGUFError(
            "carries no tokenizer that gguf-to-hf can build",
            path=tokenizer_gguf,
            help=f"give a GGUF of one of: {', '.join(ARCHS)}",
        )
    n_tokens = g.fields["tokenizer.ggml.tokens"].value.count
    if n_tokens > config["vocab_size"]:
        raise GGUFError(
            f"vocab_size {config['vocab_size']} is smaller than the tokenizer's {n_tokens} tokens: "
            "token ids past the embedding table would fault",
            path=config_file,
            field="vocab_size",
            help=f"set vocab_size to at least {n_tokens}",
        )
    _require_libraries()
    for key in ("bos_token_id", "eos_token_id"):
        v = g.get(f"tokenizer.ggml.{key}")
        if v is not None:
            config[key] = v
    try:
        with model_folder.replacing(out_dir, force=force) as tmp:
            (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
            tok = write_tokenizer(g, arch, tmp)
    except FileExistsError:
        raise GGUFError(
            "exists and is not empty", path=out_dir, help="choose an empty folder, or pass --force"
        ) from None
    return {
        "out_dir": str(out_dir),
        "architectures": config["architectures"],
        "layers": config.get("num_hidden_layers"),
        "vocab_size": config["vocab_size"],
        "tokenizer_tokens": n_tokens,
        "tokenizer": tok,
    }
