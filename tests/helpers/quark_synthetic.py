"""Synthetic AMD Quark MXFP4 MoE checkpoints (real safetensors files) for tests and benchmarks/convert_bench.py.

Layout as a Quark export writes it (one tensor per expert, U8 E2M1 + U8 E8M0 per 32),
DeepSeek-style: layers 0..L-1 quantized, layer L the MTP layer with BF16 experts.
Written tensor by tensor, so a multi-GB checkpoint needs little memory.
"""

from __future__ import annotations

import json
from pathlib import Path

from cookbook.convert.safetensors_io import Writer, plan_shards, shard_names, write_index


def _specs(layers: int, experts: int, hidden: int, inter: int, mtp: bool):
    out = [("model.embed_tokens.weight", "BF16", (256, hidden))]
    for layer in range(layers + (1 if mtp else 0)):
        p = f"model.layers.{layer}"
        bf16 = mtp and layer == layers
        out.append((f"{p}.self_attn.o_proj.weight", "BF16", (hidden, hidden)))
        out.append((f"{p}.mlp.gate.weight", "BF16", (experts, hidden)))
        for e in range(experts):
            for proj, (rows, cols) in (("gate", (inter, hidden)), ("up", (inter, hidden)), ("down", (hidden, inter))):
                name = f"{p}.mlp.experts.{e}.{proj}_proj"
                if bf16:
                    out.append((f"{name}.weight", "BF16", (rows, cols)))
                else:
                    out.append((f"{name}.weight", "U8", (rows, cols // 2)))
                    out.append((f"{name}.weight_scale", "U8", (rows, cols // 32)))
        for proj, (rows, cols) in (("gate", (inter, hidden)), ("up", (inter, hidden)), ("down", (hidden, inter))):
            name = f"{p}.mlp.shared_experts.{proj}_proj"
            if bf16:
                out.append((f"{name}.weight", "BF16", (rows, cols)))
            else:
                out.append((f"{name}.weight", "U8", (rows, cols // 2)))
                out.append((f"{name}.weight_scale", "U8", (rows, cols // 32)))
    out.append(("model.norm.weight", "BF16", (hidden,)))
    return out


def _data(rng, dtype: str, shape, name: str):
    import numpy as np

    from cookbook.mxfp4 import float32_to_bf16_bits

    if dtype == "BF16":
        return float32_to_bf16_bits(rng.standard_normal(shape, dtype=np.float32) * 0.02)
    if name.endswith("weight_scale"):
        return rng.integers(117, 127, size=shape, dtype=np.uint8)  # 2**-10 .. 2**-1: finite in BF16
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


def make_quark_checkpoint(
    out_dir,
    *,
    layers: int = 2,
    experts: int = 4,
    hidden: int = 64,
    inter: int = 32,
    mtp: bool = True,
    shard_bytes: int = 1 << 40,
    seed: int = 0,
) -> Path:
    import numpy as np

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    specs = _specs(layers, experts, hidden, inter, mtp)
    shards = plan_shards(specs, shard_bytes)
    for fname, grp in zip(shard_names(len(shards)), shards):
        w = Writer(out / fname, grp)
        for name, dtype, shape in grp:
            w.write(name, _data(rng, dtype, shape, name).tobytes())
        w.close()
    write_index(out, shards)
    mtp_exclude = (
        [f"model.layers.{layers}.mlp.experts.{e}.{p}_proj" for e in range(experts) for p in ("gate", "up", "down")]
        if mtp
        else []
    )
    config = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "hidden_size": hidden,
        "moe_intermediate_size": inter,
        "n_routed_experts": experts,
        "num_hidden_layers": layers,
        "num_nextn_predict_layers": 1 if mtp else 0,
        "quantization_config": {
            "quant_method": "quark",
            "global_quant_config": {
                "weight": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}
            },
            "exclude": ["lm_head", *mtp_exclude],
        },
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "tokenizer_config.json").write_text('{"bos_token": "<s>"}\n')
    return out
