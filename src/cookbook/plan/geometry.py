"""The model geometry the planner works from: the recipe's architecture block, with what a
checkpoint's own metadata says filled in where the recipe is silent."""

from __future__ import annotations

from dataclasses import dataclass, field

from cookbook.recipe.model import Architecture

# Layer patterns GGUF metadata does not carry: llama.cpp hard-codes them per architecture.
# gemma3: every 6th layer attends globally, the other five through the sliding window
# (google/gemma-3-270m config.json, layer_types: full_attention at layers 5, 11, 17).
SLIDING_PERIOD = {"gemma3": 6}


@dataclass
class Geometry:
    arch: Architecture
    filled_from_file: list[str] = field(default_factory=list)  # fields the checkpoint supplied

    @property
    def attention_kind(self) -> str | None:
        a = self.arch
        if a.attention:
            return a.attention
        if a.kv_lora_rank:
            return "mla"
        if a.kv_heads and a.head_dim:
            return "gqa"
        return None


# Counts a recipe may leave out (None in the model, so an untouched recipe's hash stays the same).
ZERO_WHEN_ABSENT = ("sliding_layers", "kda_layers", "mtp_layers", "shared_experts", "dense_layers")


def from_recipe(arch: Architecture, file_meta: dict | None = None) -> Geometry:
    """The recipe's geometry; fields it leaves empty are taken from `file_meta` (see gguf_meta)."""
    filled = []
    arch = arch.model_copy(
        update={k: 0 for k in ZERO_WHEN_ABSENT if getattr(arch, k) is None}
        | ({"compress_ratios": []} if arch.compress_ratios is None else {})
        | ({"sources": []} if arch.sources is None else {})
    )
    if file_meta:
        updates = {}
        for key, value in file_meta.items():
            if value is not None and getattr(arch, key, None) in (None, 0, [], False):
                updates[key] = value
                filled.append(key)
        arch = arch.model_copy(update=updates)
    return Geometry(arch, filled)


def _count(v) -> bool:
    """A geometry figure a header may give: a whole number within int64. A larger one (a 400-digit
    hidden_size) would overflow to inf in the plan's float arithmetic, so it is left out, as absent."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63


def gguf_meta(g) -> dict:
    """Architecture fields from a GGUF header (cookbook.gguf.reader.GGUFFile)."""
    arch = g.get("general.architecture")
    if not isinstance(arch, str):
        return {}

    def get(key):
        v = g.get(f"{arch}.{key}")
        return v if _count(v) else None

    layers = get("block_count")
    heads = get("attention.head_count")
    tokens = g.get("tokenizer.ggml.tokens")
    meta = {
        "layers": layers,
        "attention_heads": heads,
        "kv_heads": get("attention.head_count_kv"),
        "head_dim": get("attention.key_length"),
        "hidden_size": get("embedding_length"),
        "intermediate_size": get("feed_forward_length"),
        "native_context_tokens": get("context_length"),
        "vocab_size": get("vocab_size") or (len(tokens) if isinstance(tokens, list) else None),
        "kv_lora_rank": get("attention.kv_lora_rank"),
        "qk_rope_head_dim": get("rope.dimension_count") if get("attention.kv_lora_rank") else None,
        "routed_experts": get("expert_count"),
        "experts_per_token": get("expert_used_count"),
        "shared_experts": get("expert_shared_count"),
        "moe_intermediate_size": get("expert_feed_forward_length"),
        "dense_layers": get("leading_dense_block_count"),
        "mtp_layers": get("nextn_predict_layers"),
    }
    window = get("attention.sliding_window")
    if window and layers and arch in SLIDING_PERIOD:
        period = SLIDING_PERIOD[arch]
        meta["sliding_window"] = window
        meta["sliding_layers"] = layers - layers // period
    if meta["kv_heads"] and not meta["kv_lora_rank"]:
        meta["attention"] = "gqa"
    meta["sources"] = [f"GGUF header of {g.path.name} ({arch}.*)"]
    return {k: v for k, v in meta.items() if v is not None}


def safetensors_config_meta(config: dict) -> dict:
    """Architecture fields from a checkpoint's config.json (its text_config for multimodal models)."""
    c = config.get("text_config") if isinstance(config.get("text_config"), dict) else config

    def get(key):
        v = c.get(key)
        return v if _count(v) else None

    meta = {
        "layers": get("num_hidden_layers"),
        "attention_heads": get("num_attention_heads"),
        "kv_heads": get("num_key_value_heads"),
        "head_dim": get("head_dim"),
        "hidden_size": get("hidden_size"),
        "intermediate_size": get("intermediate_size"),
        "moe_intermediate_size": get("moe_intermediate_size"),
        "routed_experts": get("n_routed_experts"),
        "shared_experts": get("n_shared_experts"),
        "experts_per_token": get("num_experts_per_tok"),
        "dense_layers": get("first_k_dense_replace"),
        "vocab_size": get("vocab_size"),
        "kv_lora_rank": get("kv_lora_rank"),
        "qk_rope_head_dim": get("qk_rope_head_dim"),
        "mtp_layers": get("num_nextn_predict_layers"),
        "native_context_tokens": get("max_position_embeddings"),
    }
    types = c.get("layer_types")
    if isinstance(types, list) and get("sliding_window"):
        meta["sliding_window"] = get("sliding_window")
        meta["sliding_layers"] = sum(1 for t in types if t == "sliding_attention")
    if isinstance(c.get("tie_word_embeddings", config.get("tie_word_embeddings")), bool):
        meta["tie_word_embeddings"] = c.get("tie_word_embeddings", config.get("tie_word_embeddings"))
    if meta.get("kv_heads") and not meta.get("kv_lora_rank"):
        meta["attention"] = "gqa"
    return {k: v for k, v in meta.items() if v is not None}
