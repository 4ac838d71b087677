"""What a vLLM server reports of its own configuration, read from a bundle's files.

`gates run` saves, before any gate, models.json (/v1/models: the served name and
max_model_len), version.json (/version) and metrics-before.prom (/metrics, whose
vllm:cache_config_info labels are the engine's CacheConfig and whose spec-decode per-position
counters say how many tokens it drafts a step), and records reported() of them in results.json
as `server_reported`. The evidence wing reads them again and binds the bundle to the recipe
(cookbook.evidence.server_config).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cookbook.gates.metrics import parse
from cookbook.gates.recorded import MAX_FILE_BYTES, read_json

MODELS, VERSION, METRICS = "models.json", "version.json", "metrics-before.prom"
CACHE_INFO = "vllm:cache_config_info"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# serve.args key -> cache_config_info label
CACHE_LABELS = {
    "block_size": "block_size",
    "kv_cache_dtype": "cache_dtype",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "enable_prefix_caching": "enable_prefix_caching",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
}


def cache_labels(root: Path) -> dict[str, str] | None:
    """Every label of the first vllm:cache_config_info sample in metrics-before.prom (None when absent)."""
    f = root / METRICS
    if not f.is_file() or f.stat().st_size > MAX_FILE_BYTES:
        return None
    info = [labels for name, labels, _ in parse(f.read_text(encoding="utf-8", errors="replace")) if name == CACHE_INFO]
    return dict(info[0]) if info else None


def reported(root: Path, served: str) -> dict[str, Any]:
    """What the server reported of itself, from the bundle's files (ValueError when one is unreadable)."""
    out: dict[str, Any] = {}
    models = read_json(root / MODELS) if (root / MODELS).is_file() else None
    if isinstance(models, list):
        entry = next((m for m in models if isinstance(m, dict) and m.get("id") == served), None)
        out["max_model_len"] = entry.get("max_model_len") if entry else None
    version = read_json(root / VERSION) if (root / VERSION).is_file() else None
    out["version"] = version.get("version") if isinstance(version, dict) else None
    f = root / METRICS
    if f.is_file() and f.stat().st_size <= MAX_FILE_BYTES:
        samples = parse(f.read_text(encoding="utf-8", errors="replace"))
        info = [labels for name, labels, _ in samples if name == CACHE_INFO]
        out["cache_config"] = {k: info[0].get(k) for k in CACHE_LABELS.values()} if info else None
        positions = {labels.get("position") for name, labels, _ in samples if name == PER_POS}
        out["spec_positions"] = len(positions)
    return out
