"""The bundle is bound to the server it measured: what that server reported of its own
configuration must be the recipe's.

`gates run` saves, before any gate, what the server says of itself: models.json (/v1/models:
the served name and max_model_len), version.json (/version) and metrics-before.prom (vLLM's
/metrics, whose vllm:cache_config_info labels are the engine's CacheConfig and whose
spec_decode per-position counters name how many tokens are drafted). All three are in the
manifest. Re-checking a bundle against a recipe compares them with the resolved recipe, so a
genuine bundle relabelled for an edited recipe (recipe.resolved.json replaced, recipe_hash and
manifest rewritten) is refused when the edit touches any of:

    serve.args.max_model_len                          /v1/models max_model_len of the served name
    every serve.args flag that is a cache_config_info label (kv_cache_dtype as cache_dtype):
      block_size, kv_cache_dtype, gpu_memory_utilization, enable_prefix_caching,
      kv_cache_memory_bytes, num_gpu_blocks_override, prefix_caching_hash_algo,
      kv_offloading_backend, kv_offloading_size, kv_sharing_fast_prefill, the mamba cache flags, ...
    serve.args.speculative_config (on/off, and its num_speculative_tokens)
                                                      vllm:spec_decode_num_accepted_tokens_per_pos positions
    image.engine.version                              /version, the same release (cookbook.versions.same_release)

What it cannot detect (gates/VERIFIED.md lists them): settings the server does not report, such as
dtype, tool_call_parser, chat_template, max_num_seqs, max_num_batched_tokens, tensor or data
parallel sizes, compilation and environment variables; and a server that reports another
configuration than it runs, or a bundle forged consistently from scratch (these files rewritten
to match).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from cookbook.gates.server_reported import CACHE_INFO, METRICS, MODELS, cache_labels, reported
from cookbook.recipe.flags import catalogue
from cookbook.versions import same_release

LABEL_OF = {"kv_cache_dtype": "cache_dtype"}  # serve flag -> its cache_config_info label, where the names differ


def reported_flags(labels: dict[str, str]) -> dict[str, str]:
    """{serve flag: the label reporting it} for every vLLM serve flag cache_config_info reports."""
    flags = catalogue()
    return {k: LABEL_OF.get(k, k) for k in flags if LABEL_OF.get(k, k) in labels}


def _same(want: Any, got: str | None) -> bool:
    if isinstance(want, bool):
        return got == str(want)
    if isinstance(want, (int, float)):
        try:
            return math.isclose(float(want), float(got or "nan"), rel_tol=1e-9)
        except ValueError:
            return False
    return str(want) == got


def check_server(root: Path, doc: dict, resolved, served: str) -> list[str]:
    """Every way the server the bundle measured differs from what the recipe configures."""
    if not (root / MODELS).is_file() or not (root / METRICS).is_file():
        return [
            f"the bundle lacks {MODELS} or {METRICS}, so the server it measured cannot be bound to the "
            "recipe; run the gates again against a vLLM server"
        ]
    try:
        got = reported(root, served)
    except (ValueError, UnicodeDecodeError, OSError) as e:
        return [f"what the server reported of itself cannot be read ({e})"]
    serve, out = resolved.recipe.serve, []
    claimed = doc.get("server_reported")
    if claimed is not None and claimed != got:
        out.append("results.json's server_reported differs from what the bundle's files say the server reported")
    want_len = serve.arg("max_model_len")
    if want_len is not None and got.get("max_model_len") != want_len:
        out.append(
            f"the server served max_model_len {got.get('max_model_len')} (/v1/models), the recipe sets {want_len}"
        )
    labels = cache_labels(root)
    if labels is None:
        out.append(f"{METRICS} holds no {CACHE_INFO}, so the server's cache configuration cannot be checked")
    else:
        for key, label in reported_flags(labels).items():
            want = serve.arg(key)
            if want is not None and not _same(want, labels.get(label)):
                out.append(f"the server ran {label}={labels.get(label)} ({CACHE_INFO}), the recipe sets {key} {want}")
    spec = serve.arg("speculative_config")
    k = spec.get("num_speculative_tokens") if isinstance(spec, dict) else None
    positions = got.get("spec_positions") or 0
    if not spec and positions:
        out.append(
            f"the server drafted {positions} tokens a step (spec_decode counters), the recipe runs no speculation"
        )
    elif spec and isinstance(k, int) and positions != k:
        out.append(f"the server drafted {positions} tokens a step (spec_decode counters), the recipe sets {k}")
    engine = resolved.recipe.image.engine
    pinned = getattr(engine, "version", None) if engine is not None else None
    version = got.get("version")
    if pinned and isinstance(version, str) and not same_release(version, pinned):
        out.append(f"the server reports vLLM {version} (/version), the recipe pins {pinned}")
    return out
