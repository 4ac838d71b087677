"""KV bytes per token, per GPU, by what holds them, and what one sequence costs.

- gqa: 2 (K and V) x kv heads on this rank x head_dim x dtype bytes, per layer; a rank keeps
  at least one head (kv heads < TP are replicated).
- mla: one latent (kv_lora_rank + qk_rope_head_dim) per token per layer, the same on every
  TP rank (it does not shard with tensor parallelism; decode context parallelism splits the
  tokens instead). fp8_ds_mla packs it in 656 bytes (below); stock vLLM stores a sparse (DSA)
  MLA cache that way whenever the KV dtype is fp8 on Hopper.
- DSA indexer: head_dim fp8 bytes + one fp32 scale per 128 per token, in each indexer layer, and
  in the MTP layer when it runs (vLLM builds an indexer in every MTP layer).
- kda-mla: only the MLA layers hold per-token KV; KDA layers keep a fixed state per sequence.
- compressed-mla (DeepSeek-V4): on stock vLLM 0.26+, dsv4_layout.py's model of vLLM's own
  grouped, padded layout; elsewhere one head_dim latent per `ratio` tokens per layer (its indexer
  keys too in the ratio-4 layers), plus a sliding window per sequence.
- MTP layers (method mtp / deepseek_mtp) hold KV like the target's layers; a separate draft
  model (dspark, eagle) holds its own gqa KV, at its compressed bytes per value when it has one.

Sliding windows are charged per sequence, not per token, the way vLLM v1 reserves them
(v1/kv_cache_interface.py, SlidingWindowSpec.max_admission_blocks_per_request in 0.26.0): a window
layer holds at most `window - 1 + in-flight tokens` tokens (never more than the sequence), rounded
up to blocks, plus one block. In-flight tokens are max_num_batched_tokens times the batches in
flight (2 with async scheduling).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cookbook.plan import dsv4_layout as D
from cookbook.plan.geometry import Geometry

# vLLM 0.26.0 v1/attention/backends/mla/flashmla_sparse.py (the "FP8 with scale" format of DeepSeek
# V3.2's sparse MLA, FLASHMLA_SPARSE): 512 fp8 NoPE values + 4 fp32 scales (16 B) + 64 BF16 RoPE
# values (128 B) = 656 bytes a token a layer (v1/kv_cache_interface.py, MLAAttentionSpec).
FP8_DS_MLA_BYTES = 656
MTP_METHODS = ("mtp", "deepseek_mtp", "glm4_moe_mtp", "ernie_mtp", "qwen3_next_mtp", "mimo_mtp")
DRAFT_METHODS = ("dspark", "eagle", "eagle3", "draft_model", "medusa")
# vLLM's default KV block on CUDA (config/cache.py) where the recipe sets none; sliding windows
# are reserved in whole blocks.
DEFAULT_BLOCK_SIZE = 16


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class KVPart:
    name: str
    bytes_per_token: float  # per GPU, for each token the part holds
    layers: int
    window: int | None = None  # sliding: held per sequence, at most window + in-flight tokens
    note: str = ""
    in_pool: bool = True  # False: allocated after vLLM sizes the pool, for as many tokens as the pool holds
    block_size: int = DEFAULT_BLOCK_SIZE


@dataclass
class KV:
    parts: list[KVPart] = field(default_factory=list)
    per_seq_fixed_bytes: int = 0  # states that do not grow with the sequence
    notes: list[str] = field(default_factory=list)
    in_flight_tokens: int = 0  # what a sliding window reserves beside itself (vLLM v1)
    layout: D.Layout | None = None  # DeepSeek-V4 on stock vLLM: the grouped, padded layout

    @property
    def bytes_per_token(self) -> float:
        """What each token of a sequence adds: the in-pool parts without a window (a window's
        bytes are charged once per sequence, see window_tokens)."""
        return sum(p.bytes_per_token for p in self.parts if p.in_pool and not p.window)

    @property
    def outside_pool_bytes_per_token(self) -> float:
        return sum(p.bytes_per_token for p in self.parts if not p.in_pool)

    def window_tokens(self, part: KVPart, tokens: int) -> int:
        """Tokens a sliding part holds for one sequence of `tokens`, as vLLM reserves them."""
        reserve = min(part.window - 1 + self.in_flight_tokens, tokens)
        return (_cdiv(reserve, part.block_size) + 1) * part.block_size

    def bytes_for_sequence(self, tokens: int) -> float:
        """What one sequence of `tokens` holds in the pool (DeepSeek-V4: vLLM's padded layout)."""
        if self.layout is not None:
            return self.per_seq_fixed_bytes + self.layout.padded_seq_bytes(tokens)
        total = self.per_seq_fixed_bytes
        for p in (q for q in self.parts if q.in_pool):
            total += p.bytes_per_token * (self.window_tokens(p, tokens) if p.window else tokens)
        return total

    def logged_bytes_for_sequence(self, tokens: int) -> float:
        """What vLLM's log charges one sequence of `tokens` ("Maximum concurrency", "GPU KV cache
        size"): the same as bytes_for_sequence except in DeepSeek-V4's layout (dsv4_layout.py)."""
        if self.layout is not None:
            return self.per_seq_fixed_bytes + self.layout.logged_seq_bytes(tokens)
        return self.bytes_for_sequence(tokens)

    def vllm_bytes_per_token(self, tokens: int) -> float:
        """KV bytes per token as vLLM's log gives them (its pool over "GPU KV cache size") when
        max_model_len is `tokens`."""
        return self.logged_bytes_for_sequence(tokens) / tokens if tokens else 0.0


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


def indexer_key_bytes(head_dim: int) -> int:
    """fp8 keys + one fp32 scale per 128 values (128 + 4 = 132 for head_dim 128)."""
    return head_dim + 4 * _cdiv(head_dim, 128)


def per_token(
    geom: Geometry,
    *,
    tp: int,
    kv_dtype: str = "auto",
    model_dtype: str | None = None,
    dcp: int = 1,
    spec: dict | None = None,
    indexer_in_pool: bool = True,
    sparse_fp8_ds_mla: bool = False,
    vllm_dsv4_layout: bool = False,
    block_size: int | None = None,
    in_flight_tokens: int = 0,
) -> KV:
    """The KV of one GPU. `sparse_fp8_ds_mla`: the engine stores an fp8 sparse-MLA cache as
    fp8_ds_mla (stock vLLM on Hopper); `vllm_dsv4_layout`: DeepSeek-V4 in stock vLLM 0.26's layout;
    `block_size` (serve.args.block_size) and `in_flight_tokens` size the sliding windows' reserve."""
    a = geom.arch
    kind = geom.attention_kind
    mbytes = model_dtype_bytes(model_dtype)
    kv = KV(in_flight_tokens=in_flight_tokens)
    if kind is None or not a.layers:
        kv.notes.append("the recipe has no attention geometry: KV bytes unknown")
        return kv
    d = (kv_dtype or "").lower()
    quantized = d.startswith("fp8")
    ds_mla = d == "fp8_ds_mla" or (sparse_fp8_ds_mla and quantized and (a.indexer is not None))
    b = 1.0 if ds_mla else dtype_bytes(kv_dtype, mbytes)
    method = (spec or {}).get("method")
    mtp_on = method in MTP_METHODS and bool(a.mtp_layers)
    if kind == "compressed-mla" and vllm_dsv4_layout:
        _dsv4_vllm(kv, a, a.layers, block_size or 256, quantized, b, mtp_on, in_flight_tokens)
        mtp_layer = None
    else:
        mtp_layer = _attention_parts(kv, geom, b, tp=tp, dcp=dcp, ds_mla=ds_mla, block=block_size or DEFAULT_BLOCK_SIZE)
    if a.indexer and kind != "compressed-mla" and a.indexer.layers:
        kv.parts.append(_indexer_part(a, mtp_on, dcp, indexer_in_pool))
    if mtp_on and mtp_layer is not None:
        kv.parts.append(
            KVPart("MTP layer", mtp_layer * a.mtp_layers, a.mtp_layers, note=f"speculative method {method}")
        )
    elif method in DRAFT_METHODS:
        _draft_part(kv, a, method, spec, tp, b)
    return kv


def _attention_parts(kv: KV, geom: Geometry, b: float, *, tp: int, dcp: int, ds_mla: bool, block: int) -> float:
    """The attention layers' parts of the KV (gqa, mla, kda-mla, compressed-mla as the recipe gives it);
    returns the bytes per token of one MTP layer of that attention."""
    a = geom.arch
    kind = geom.attention_kind
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
                KVPart(
                    "attention (sliding window)",
                    per_layer * a.sliding_layers,
                    a.sliding_layers,
                    a.sliding_window,
                    note="",
                    block_size=block,
                )
            )
        return per_layer
    if kind in ("mla", "kda-mla"):
        mla = a.mla_layers if kind == "kda-mla" and a.mla_layers is not None else layers - a.kda_layers
        note = "latent replicated on every TP rank" + (f", split over DCP {dcp}" if dcp > 1 else "")
        if ds_mla:
            note += ", fp8_ds_mla 656 B entries"
        kv.parts.append(KVPart("MLA latent", mla_layer_bytes() * mla, mla, note=note))
        if kind == "kda-mla" and a.kda_layers:
            kv.notes.append(
                f"{a.kda_layers} KDA layers keep a fixed recurrent state per sequence; its size is not in the "
                "recipe's geometry and is not counted"
            )
        return mla_layer_bytes()
    if kind == "compressed-mla":
        hd = a.head_dim or 512
        ratios = a.compress_ratios[:layers] or [0] * layers
        compressed = sum(hd * b / r for r in ratios if r)
        kv.parts.append(
            KVPart("compressed latent", compressed, sum(1 for r in ratios if r), note="1 entry per ratio tokens")
        )
        if a.sliding_window:
            kv.parts.append(KVPart("sliding window", hd * b * layers, layers, a.sliding_window, block_size=block))
        if a.indexer:
            idx = sum(indexer_key_bytes(a.indexer.head_dim) / r for r in ratios if r == 4)
            kv.parts.append(KVPart("DSA indexer keys", idx, sum(1 for r in ratios if r == 4), note="ratio-4 layers"))
        return hd * b
    raise ValueError(f"unknown attention kind {kind!r}")


def _indexer_part(a, mtp_on: bool, dcp: int, indexer_in_pool: bool) -> KVPart:
    """The DSA indexer's keys of a sparse-attention model (compressed-mla counts its own)."""
    per = indexer_key_bytes(a.indexer.head_dim)
    idx_layers = a.indexer.layers + (a.mtp_layers if mtp_on else 0)
    note = "" if indexer_in_pool else "allocated after the pool is sized, one key per pool token"
    if mtp_on:
        # vLLM 0.26.0 models/deepseek_v2.py builds an indexer in every MTP layer, whatever the
        # layer-skip pattern says (`not _skip_topk or is_mtp_layer`).
        note = (note + "; " if note else "") + f"the MTP layer's {a.mtp_layers} included"
    return KVPart("DSA indexer keys", per * idx_layers / dcp, idx_layers, note=note, in_pool=indexer_in_pool)


def _draft_part(kv: KV, a, method: str, spec: dict | None, tp: int, b: float) -> None:
    """A draft model's own KV (its geometry in the recipe), or a note that it is not counted."""
    d = a.draft
    if d is None:
        kv.notes.append(
            f"speculative method {method}: the draft model's geometry is not in the recipe; its KV is not counted"
        )
        return
    dtp = (spec or {}).get("draft_tensor_parallel_size") or tp
    # A compressed draft KV (TurboQuant) counts only where the launch block enables it.
    compressed = d.kv_bytes_per_value is not None and (
        d.compressed_kv_dtype is None or (spec or {}).get("kv_cache_dtype") == d.compressed_kv_dtype
    )
    vb = d.kv_bytes_per_value if compressed else b
    per = 2 * max(1, d.kv_heads // dtp) * d.head_dim * vb * d.layers
    note = (
        f"compressed draft KV ({d.compressed_kv_dtype or 'as the recipe gives it'})"
        if compressed
        else "draft KV at the target's dtype"
        + (f" ({d.compressed_kv_dtype} is not enabled by the launch block)" if d.compressed_kv_dtype else "")
    )
    kv.parts.append(KVPart("draft model", per, d.layers, note=note))


def _dsv4_vllm(kv: KV, a, layers: int, block: int, fp8: bool, b: float, mtp_on: bool, in_flight: int) -> None:
    """DeepSeek-V4 in stock vLLM's layout (dsv4_layout.py): the parts as each page's bytes per token,
    the per-sequence cost from the grouped, padded layout."""
    ratios = list(a.compress_ratios[:layers] or [0] * layers)
    if len(ratios) < layers:
        ratios += [0] * (layers - len(ratios))
    if mtp_on:
        ratios.append(0)
        kv.notes.append(
            "the MTP layer is counted as one more sliding-window-only layer (an assumption: its cache spec "
            "was not checked against vLLM)"
        )
    pages = D.layer_pages(
        ratios,
        head_dim=a.head_dim or 512,
        indexer_head_dim=a.indexer.head_dim if a.indexer else None,
        window=a.sliding_window or 128,
        block_size=block,
        fp8_ds_mla=fp8,  # vLLM 0.26.0 asserts an fp8 cache for DeepSeek-V4 on Hopper and stores it so
        value_bytes=b,
    )
    kv.layout = D.layout(pages, in_flight_tokens=in_flight)
    fmt = "fp8_ds_mla 584 B entries" if fp8 else f"{b:g} B values"
    groups: dict[str, list] = {}
    for p in pages:
        groups.setdefault(p.name, []).append(p)
    for name, members in groups.items():
        window = members[0].window
        per_token = sum(p.page_bytes / p.block_size for p in members)
        note = {
            "compressed latent": f"1 entry per ratio tokens, {fmt}, pages padded to 576 B",
            "DSA indexer keys": "ratio-4 layers, 132 B per 4 tokens",
            "sliding window": fmt,
            "compressor state": "float32 kv + score",
        }.get(name, "")
        kv.parts.append(KVPart(name, per_token, len(members), window, note, block_size=members[0].block_size))
