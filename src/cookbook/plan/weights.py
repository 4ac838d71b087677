"""Weight bytes by tensor group: from a checkpoint's tensor table (GGUF or safetensors,
read with the package's own header readers), or estimated from the recipe's geometry and
the quant's on-disk size."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cookbook.plan.geometry import Geometry
from cookbook.units import GIB

GROUPS = (
    "embeddings",
    "lm_head",
    "attention",
    "indexer",
    "dense_mlp",
    "router",
    "shared_experts",
    "routed_experts",
    "mtp",
    "vision",
    "norms",
    "other",
)

# GGUF tensor names (llama.cpp's): blk.N.<part>
_GGUF_BLOCK = re.compile(r"^blk\.(\d+)\.(.+)$")
# safetensors names (transformers'): [model.][language_model.]layers.N.<part>
_ST_BLOCK = re.compile(r"^(?:.*\.)?layers\.(\d+)\.(.+)$")


@dataclass
class WeightGroup:
    name: str
    bytes: int = 0
    elements: int = 0
    dtypes: dict[str, int] = field(default_factory=dict)  # dtype -> bytes
    estimated: bool = False

    @property
    def bits_per_weight(self) -> float | None:
        return self.bytes * 8 / self.elements if self.elements else None

    def add(self, dtype: str, nbytes: int, elements: int) -> None:
        self.bytes += nbytes
        self.elements += elements
        self.dtypes[dtype] = self.dtypes.get(dtype, 0) + nbytes


@dataclass
class Weights:
    groups: dict[str, WeightGroup]
    source: str  # "gguf:<path>", "safetensors:<path>", "recipe"
    notes: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(g.bytes for g in self.groups.values())


def _classify(part: str, layer: int | None, layers: int | None, gguf: bool) -> str:
    p = part.lower()
    if layer is not None and layers is not None and layer >= layers:
        return "mtp"
    if layer is None:
        if gguf:
            if p.startswith("token_embd"):
                return "embeddings"
            if p.startswith("output.") or p == "output":
                return "lm_head"
            if p.startswith(("v.", "mm.", "vision")):
                return "vision"
            return "norms" if "norm" in p else "other"
        if "embed_tokens" in p:
            return "embeddings"
        if "lm_head" in p:
            return "lm_head"
        if "vision" in p or "visual" in p or "mm_projector" in p or "multi_modal" in p:
            return "vision"
        return "norms" if "norm" in p else "other"
    if "indexer" in p:
        return "indexer"
    if "norm" in p and "exps" not in p:
        return "norms"
    if gguf:
        if "_exps" in p or "exp_probs" in p:
            return "routed_experts"
        if "_shexp" in p:
            return "shared_experts"
        if p.startswith("ffn_gate_inp"):
            return "router"
        if p.startswith("ffn_"):
            return "dense_mlp"
        if p.startswith(("attn_", "ssm_", "kda")):
            return "attention"
        return "other"
    if ".experts." in p or p.startswith("mlp.experts") or "block_sparse_moe.experts" in p:
        return "routed_experts"
    if "shared_expert" in p:
        return "shared_experts"
    if re.search(r"mlp\.gate\.(weight|e_score)", p) or "router" in p:
        return "router"
    if p.startswith(("mlp.", "feed_forward.")):
        return "dense_mlp"
    if p.startswith(("self_attn.", "attn.", "linear_attn.", "attention.")):
        return "attention"
    return "other"


def from_gguf(g, layers: int | None) -> Weights:
    """Every tensor of a GGUF file (cookbook.gguf.reader.GGUFFile), grouped."""
    groups: dict[str, WeightGroup] = {}
    for t in g.tensors:
        m = _GGUF_BLOCK.match(t.name)
        name = _classify(m.group(2) if m else t.name, int(m.group(1)) if m else None, layers, gguf=True)
        groups.setdefault(name, WeightGroup(name)).add(t.type.name, t.nbytes, t.n_elements)
    return Weights(_ordered(groups), f"gguf:{g.path}")


def from_safetensors(paths: list[Path], tables: list[dict], layers: int | None) -> Weights:
    """Every tensor of the safetensors shards (tables from cookbook.convert.safetensors_io.read_header)."""
    groups: dict[str, WeightGroup] = {}
    for table in tables:
        for t in table.values():
            m = _ST_BLOCK.match(t.name)
            name = _classify(m.group(2) if m else t.name, int(m.group(1)) if m else None, layers, gguf=False)
            n = 1
            for d in t.shape:
                n *= d
            groups.setdefault(name, WeightGroup(name)).add(t.dtype, t.nbytes, n)
    where = paths[0].parent if len(paths) > 1 else paths[0]
    return Weights(_ordered(groups), f"safetensors:{where}")


def _ordered(groups: dict[str, WeightGroup]) -> dict[str, WeightGroup]:
    return {k: groups[k] for k in GROUPS if k in groups} | {k: v for k, v in groups.items() if k not in GROUPS}


def param_counts(geom: Geometry) -> dict[str, int]:
    """Parameters per group from the geometry (standard transformer / DeepSeek MoE shapes)."""
    a = geom.arch
    h, layers = a.hidden_size, a.layers
    if not h or not layers:
        return {}
    out: dict[str, int] = {}
    if a.vocab_size:
        out["embeddings"] = a.vocab_size * h
        if not a.tie_word_embeddings:
            out["lm_head"] = a.vocab_size * h
    heads = a.attention_heads or 0
    if a.kv_lora_rank and heads:
        nope, rope = a.qk_nope_head_dim or 128, a.qk_rope_head_dim or 64
        v = a.v_head_dim or nope
        q = (h * a.q_lora_rank + a.q_lora_rank * heads * (nope + rope)) if a.q_lora_rank else h * heads * (nope + rope)
        attn = q + h * (a.kv_lora_rank + rope) + a.kv_lora_rank * heads * (nope + v) + heads * v * h
    elif heads and a.head_dim:
        kv = a.kv_heads or heads
        attn = h * heads * a.head_dim * 2 + 2 * h * kv * a.head_dim
    else:
        attn = 0
    out["attention"] = attn * layers
    if a.indexer:
        qdim = a.q_lora_rank or h
        out["indexer"] = a.indexer.layers * (
            qdim * a.indexer.heads * a.indexer.head_dim + h * a.indexer.head_dim + h * a.indexer.heads
        )
    moe_layers = layers - a.dense_layers if a.routed_experts else 0
    if a.intermediate_size and (a.dense_layers or not a.routed_experts):
        out["dense_mlp"] = (a.dense_layers if a.routed_experts else layers) * 3 * h * a.intermediate_size
    if a.routed_experts and a.moe_intermediate_size:
        expert = 3 * h * a.moe_intermediate_size
        out["router"] = moe_layers * a.routed_experts * h
        if a.shared_experts:
            out["shared_experts"] = moe_layers * a.shared_experts * expert
        out["routed_experts"] = moe_layers * a.routed_experts * expert
    if a.mtp_layers:
        per_layer = attn + 2 * h * h
        if a.routed_experts and a.moe_intermediate_size:
            per_layer += (a.routed_experts + a.shared_experts) * 3 * h * a.moe_intermediate_size
        out["mtp"] = a.mtp_layers * per_layer
    if a.vision_params_b:
        out["vision"] = int(a.vision_params_b * 1e9)
    return out


def from_recipe(geom: Geometry, size_gib: float | None, fmt: str) -> Weights:
    """Estimated groups: the quant's size spread over the geometry's parameter counts.

    Everything but the routed experts is taken at the bits a format keeps them at (GGUF routed
    quants keep them near Q8_0, safetensors checkpoints at BF16); the routed experts (and the
    MTP layer's) get the rest of the on-disk size, so their bits are derived, not known. A vision
    tower (vision_params_b, BF16) is added on top: it is a file of its own."""
    counts = param_counts(geom)
    notes = []
    if size_gib is None:
        return Weights({}, "recipe", ["the recipe gives no size for its weights: pass --checkpoint to count them"])
    if not counts:
        g = WeightGroup("all", int(size_gib * GIB), 0, {"(on-disk size)": int(size_gib * GIB)}, True)
        return Weights({"all": g}, "recipe", ["the recipe gives a size and no geometry: one group"])
    other_bits = 8.5 if fmt == "gguf" else 16.0
    # the routed experts and, where the model has one, its MTP layer (a recipe without mtp_layers has none)
    quantized = tuple(k for k in ("routed_experts", "mtp") if k in counts) if "routed_experts" in counts else ()
    groups = {}
    fixed = 0
    for name, n in counts.items():
        if name in quantized:
            continue
        bits = 16.0 if name == "vision" else other_bits
        b = int(n * bits / 8)
        groups[name] = WeightGroup(name, b, n, {f"~{bits:g} bits (assumed)": b}, True)
        fixed += b
    rest_params = sum(counts[k] for k in quantized)
    if quantized:
        # A vision tower ships in its own file (the projector), on top of the quant's size.
        rest = int(size_gib * GIB) - (fixed - (groups["vision"].bytes if "vision" in groups else 0))
        if rest <= 0:
            notes.append("the other groups alone exceed the quant's size: their assumed bits are too high")
            rest = int(size_gib * GIB * 0.8)
        bits = rest * 8 / rest_params
        for name in quantized:
            b = int(rest * counts[name] / rest_params)
            groups[name] = WeightGroup(name, b, counts[name], {f"{bits:.2f} bits (derived from size_gib)": b}, True)
    else:
        scale = size_gib * GIB / max(fixed, 1)
        for g in groups.values():
            g.bytes = int(g.bytes * scale)
        notes.append("dense model: every group scaled to the quant's size")
    return Weights(_ordered(groups), "recipe", notes)
