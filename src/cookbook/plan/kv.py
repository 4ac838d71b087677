"""KV bytes per token, per GPU, by what holds them.

- gqa: 2 (K and V) x kv heads on this rank x head_dim x dtype bytes, per layer; a rank keeps
  at least one head (kv heads < TP are replicated). Sliding-window layers hold at most the
  window per sequence.
- mla: one latent (kv_lora_rank + qk_rope_head_dim) per token per layer, the same on every
  TP rank (it does not shard with tensor parallelism; decode context parallelism splits the
  tokens instead). fp8_ds_mla packs it as 512 fp8 bytes + 4 fp32 scales + 64 BF16 rope
  values = 656 bytes (vLLM's FlashMLA sparse layout).
- DSA indexer: head_dim fp8 bytes + one fp32 scale per 128 per token, in each indexer layer.
- kda-mla: only the MLA layers hold per-token KV; KDA layers keep a fixed state per sequence.
- compressed-mla (DeepSeek-V4): each layer caches one head_dim latent per `ratio` tokens
  (its indexer keys too in the ratio-4 layers), plus a sliding window per sequence.
- MTP layers (method mtp / deepseek_mtp) hold KV like the target's layers; a separate draft
  model (dspark, eagle) holds its own gqa KV, at its compressed bytes per value when it has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cookbook.plan.geometry import Geometry

FP8_DS_MLA_BYTES = 656  # 512 x fp8 + 4 x fp32 scales + 64 x bf16 rope
MTP_METHODS = ("mtp", "deepseek_mtp", "glm4_moe_mtp", "ernie_mtp", "qwen3_next_mtp", "mimo_mtp")
DRAFT_METHODS = ("dspark", "eagle", "eagle3", "draft_model", "medusa")


@dataclass
class KVPart:
    name: str
    bytes_per_token: float  # per GPU, for every token of a sequence
    layers: int
    window: int | None = None  # sliding: at most this many tokens per sequence
    note: str = ""
    in_pool: bool = True  # False: allocated after vLLM sizes the pool, for as many tokens as the pool holds


@dataclass
class KV:
    parts: list[KVPart] = field(default_factory=list)
    per_seq_fixed_bytes: int = 0  # states that do not grow with the sequence
    notes: list[str] = field(default_factory=list)

    @property
    def bytes_per_token(self) -> float:
        """Every in-pool layer counted for every token: how vLLM's hybrid allocator sizes its pages."""
        return sum(p.bytes_per_token for p in self.parts if p.in_pool)

    @property
    def outside_pool_bytes_per_token(self) -> float:
        return sum(p.bytes_per_token for p in self.parts if not p.in_pool)

    def bytes_for_sequence(self, tokens: int) -> float:
        total = self.per_seq_fixed_bytes
        for p in (q for q in self.parts if q.in_pool):
            total += p.bytes_per_token * (min(tokens, p.window) if p.window else tokens)
        return total


def dtype_bytes(kv_dtype: str, model_dtype_bytes: float) -> float:
    d = (kv_dtype or "auto").lower()
    if d == "auto":
        return model_dtype_bytes
    if d.startswith("fp8") or d in ("int8", "uint8"):
        return 1.0
    if d in ("bfloat16", "float16", "half", "bf16", "fp16"):
        return 2.0
    if d in ("float32", "float", "fp32"):
        return 4.0
    raise ValueError(f"unknown kv_cache_dtype {kv_dtype!r}")


def model_dtype_bytes(dtype: str | None) -> float:
    return 4.0 if (dtype or "").lower() in ("float32", "float") else 2.0


def per_token(
    geom: Geometry,
    *,
    tp: int,
    kv_dtype: str = "auto",
    model_dtype: str | None = None,
    dcp: int = 1,
    spec: dict | None = None,
    indexer_in_pool: bool = True,
) -> KV:
    a = geom.arch
    kind = geom.attention_kind
    mbytes = model_dtype_bytes(model_dtype)
    kv = KV()
    if kind is None or not a.layers:
        kv.notes.append("the recipe has no attention geometry: KV bytes unknown")
        return kv
    ds_mla = (kv_dtype or "").lower() == "fp8_ds_mla"
    b = 1.0 if ds_mla else dtype_bytes(kv_dtype, mbytes)
    layers = a.layers

    def mla_layer_bytes() -> float:
        latent = (a.kv_lora_rank or 512) + (a.qk_rope_head_dim or 64)
        return (FP8_DS_MLA_BYTES if ds_mla else latent * b) / dcp

    def gqa_layer_bytes(kv_heads: int, head_dim: int, value_bytes: float) -> float:
        return 2 * max(1, kv_heads // tp) * head_dim * value_bytes

    if kind == "gqa":
        per_layer = gqa_layer_bytes(a.kv_heads or a.attention_heads or 1, a.head_dim or 128, b)
        full = layers - a.sliding_layers
        if full:
            kv.parts.append(KVPart("attention (full)", per_layer * full, full))
        if a.sliding_layers:
            kv.parts.append(
                KVPart("attention (sliding window)", per_layer * a.sliding_layers, a.sliding_layers, a.sliding_window)
            )
        mtp_layer = per_layer
    elif kind in ("mla", "kda-mla"):
        mla = a.mla_layers if kind == "kda-mla" and a.mla_layers is not None else layers - a.kda_layers
        note = "latent replicated on every TP rank" + (f", split over DCP {dcp}" if dcp > 1 else "")
        kv.parts.append(KVPart("MLA latent", mla_layer_bytes() * mla, mla, note=note))
        if kind == "kda-mla" and a.kda_layers:
            kv.notes.append(
                f"{a.kda_layers} KDA layers keep a fixed recurrent state per sequence; its size is not in the "
                "recipe's geometry and is not counted"
            )
        mtp_layer = mla_layer_bytes()
    elif kind == "compressed-mla":
        hd = a.head_dim or 512
        ratios = a.compress_ratios[:layers] or [0] * layers
        compressed = sum(hd * b / r for r in ratios if r)
        kv.parts.append(
            KVPart("compressed latent", compressed, sum(1 for r in ratios if r), note="1 entry per ratio tokens")
        )
        if a.sliding_window:
            kv.parts.append(KVPart("sliding window", hd * b * layers, layers, a.sliding_window))
        if a.indexer:
            idx = sum((a.indexer.head_dim + 4 * -(-a.indexer.head_dim // 128)) / r for r in ratios if r == 4)
            kv.parts.append(KVPart("DSA indexer keys", idx, sum(1 for r in ratios if r == 4), note="ratio-4 layers"))
        mtp_layer = hd * b
    else:
        raise ValueError(f"unknown attention kind {kind!r}")

    if a.indexer and kind != "compressed-mla" and a.indexer.layers:
        per = a.indexer.head_dim + 4 * -(-a.indexer.head_dim // 128)
        note = "" if indexer_in_pool else "allocated after the pool is sized, one key per pool token"
        kv.parts.append(
            KVPart(
                "DSA indexer keys", per * a.indexer.layers / dcp, a.indexer.layers, note=note, in_pool=indexer_in_pool
            )
        )

    method = (spec or {}).get("method")
    if method in MTP_METHODS and a.mtp_layers:
        kv.parts.append(
            KVPart("MTP layer", mtp_layer * a.mtp_layers, a.mtp_layers, note=f"speculative method {method}")
        )
    elif method in DRAFT_METHODS:
        d = a.draft
        if d is None:
            kv.notes.append(
                f"speculative method {method}: the draft model's geometry is not in the recipe; its KV is not counted"
            )
        else:
            dtp = (spec or {}).get("draft_tensor_parallel_size") or tp
            vb = d.kv_bytes_per_value or b
            per = 2 * max(1, d.kv_heads // dtp) * d.head_dim * vb * d.layers
            note = "compressed draft KV" if d.kv_bytes_per_value else "draft KV at the target's dtype"
            kv.parts.append(KVPart("draft model", per, d.layers, note=note))
    return kv
