"""`cookbook plan` output: a table per GPU, or JSON (PLAN_JSON_SCHEMA describes it)."""

from __future__ import annotations

from cookbook.plan.budget import GIB, Plan
from cookbook.untrusted import printable

PLAN_JSON_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "cookbook plan --json",
    "type": "object",
    "required": ["recipe", "quant", "fits", "setup", "weights", "kv", "memory", "fit", "refusals", "warnings"],
    "properties": {
        "recipe": {"type": "string"},
        "quant": {"type": ["string", "null"]},
        "fits": {"type": "boolean"},
        "setup": {
            "type": "object",
            "required": ["platform", "device_bytes", "tp", "dcp", "max_model_len", "max_num_seqs", "kv_cache_dtype"],
        },
        "weights": {
            "type": "object",
            "required": ["source", "total_bytes", "per_gpu_bytes", "groups"],
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "bytes", "per_gpu_bytes", "bits_per_weight", "dtypes", "estimated"],
                        "properties": {
                            "bytes": {"type": "integer", "minimum": 0},
                            "per_gpu_bytes": {"type": "integer", "minimum": 0},
                            "bits_per_weight": {"type": ["number", "null"]},
                        },
                    },
                }
            },
        },
        "kv": {
            "type": "object",
            "required": ["bytes_per_token", "parts"],
            "properties": {
                "bytes_per_token": {"type": "number", "minimum": 0},
                "parts": {
                    "type": "array",
                    "items": {"type": "object", "required": ["name", "bytes_per_token", "layers", "window"]},
                },
            },
        },
        "memory": {
            "type": "object",
            "required": [
                "device_bytes",
                "requested_bytes",
                "weights_bytes",
                "left_after_weights_bytes",
                "activation_bytes",
                "non_torch_bytes",
                "workspace_bytes",
                "cuda_graph_bytes",
                "vllm_pool_bytes",
                "pool_bytes",
                "pool_tokens",
                "left_bytes",
            ],
        },
        "fit": {"type": "object", "required": ["seq_bytes_at_ctx", "max_seqs_at_ctx", "max_ctx_at_seqs"]},
        "refusals": {"type": "array", "items": {"type": "string"}},
        "warnings": {"type": "array", "items": {"type": "string"}},
        "assumptions": {"type": "array", "items": {"type": "string"}},
    },
}


def as_json(p: Plan) -> dict:
    s = p.setup
    return {
        "recipe": p.slug,
        "quant": p.quant,
        "fits": p.fits,
        "setup": {
            "platform": s.platform,
            "device_bytes": s.device_bytes,
            "gpus": s.gpus,
            "tp": s.tp,
            "dp": s.dp,
            "dcp": s.dcp,
            "expert_parallel": s.expert_parallel,
            "max_model_len": s.max_model_len,
            "max_num_seqs": s.max_num_seqs,
            "max_num_batched_tokens": s.max_num_batched_tokens,
            "gpu_memory_utilization": s.gpu_memory_utilization,
            "kv_cache_dtype": s.kv_cache_dtype,
            "speculative": s.speculative,
        },
        "weights": {
            "source": p.weights.source,
            "total_bytes": p.weights.total_bytes,
            "per_gpu_bytes": p.weights_per_gpu_bytes,
            "draft_per_gpu_bytes": p.draft_weights_per_gpu,
            "groups": [
                {
                    "name": g.name,
                    "bytes": g.bytes,
                    "per_gpu_bytes": p.weights_per_gpu.get(g.name, 0),
                    "elements": g.elements,
                    "bits_per_weight": round(g.bits_per_weight, 3) if g.bits_per_weight else None,
                    "dtypes": g.dtypes,
                    "estimated": g.estimated,
                }
                for g in p.weights.groups.values()
            ],
        },
        "kv": {
            "bytes_per_token": p.kv.bytes_per_token,
            "vllm_bytes_per_token": p.vllm_kv_bytes_per_token,
            "per_sequence_fixed_bytes": p.kv.per_seq_fixed_bytes,
            "parts": [
                {
                    "name": k.name,
                    "bytes_per_token": k.bytes_per_token,
                    "layers": k.layers,
                    "window": k.window,
                    "note": k.note,
                }
                for k in p.kv.parts
            ],
        },
        "memory": {
            "device_bytes": s.device_bytes,
            "requested_bytes": p.requested_bytes,
            "weights_bytes": p.weights_per_gpu_bytes,
            "left_after_weights_bytes": p.left_after_weights_bytes,
            "activation_bytes": p.activation_bytes,
            "non_torch_bytes": p.non_torch_bytes,
            "workspace_bytes": p.workspace_bytes,
            "cuda_graph_bytes": p.graph_bytes,
            "vllm_pool_bytes": p.vllm_pool_bytes,
            "pool_bytes": p.pool_bytes,
            "pool_tokens": p.pool_tokens,
            "left_bytes": p.left_bytes,
        },
        "fit": {
            "seq_bytes_at_ctx": p.seq_bytes_at_ctx,
            "max_seqs_at_ctx": p.max_seqs_at_ctx,
            "max_ctx_at_seqs": p.max_ctx_at_seqs,
            "vllm_logged_seqs_at_ctx": round(p.logged_seqs_at_ctx, 2),
        },
        "refusals": p.refusals,
        "warnings": p.warnings,
        "assumptions": p.assumptions,
    }


def _g(n: float) -> str:
    return f"{n / GIB:10,.2f} GiB"


def _experts_a_rank(p: Plan) -> str:
    n, ranks = p.geometry.arch.routed_experts, p.setup.tp * p.setup.dp
    return f" ({n // ranks} of {n} routed experts a rank)" if n and n % ranks == 0 else ""


def as_text(p: Plan) -> str:
    s = p.setup
    lines = [
        f"plan {p.slug}"
        + (f" --quant {p.quant}" if p.quant else "")
        + f": {s.gpus}x {s.platform}, TP {s.tp}"
        + (f" x DP {s.dp}" if s.dp > 1 else "")
        + (f", DCP {s.dcp}" if s.dcp > 1 else "")
        + (f", EP over {s.tp * s.dp} ranks{_experts_a_rank(p)}" if s.expert_parallel else ""),
        f"  max_model_len {s.max_model_len:,}, max_num_seqs {s.max_num_seqs}, kv_cache_dtype {s.kv_cache_dtype}, "
        f"gpu_memory_utilization {s.gpu_memory_utilization:g}",
        "",
        f"weights per GPU (from {printable(p.weights.source)}):",
        f"  {'group':<16}{'total':>14}{'per GPU':>16}  bits/weight  stored as",
    ]
    for g in p.weights.groups.values():
        bits = f"{g.bits_per_weight:6.2f}" if g.bits_per_weight else "     ?"
        kinds = ", ".join(printable(k) for k in sorted(g.dtypes, key=lambda k: -g.dtypes[k])[:3])
        lines.append(f"  {g.name:<16}{_g(g.bytes)}{_g(p.weights_per_gpu.get(g.name, 0)):>16}  {bits:>11}  {kinds}")
    if p.draft_weights_per_gpu:
        lines.append(f"  {'draft model':<16}{'':>14}{_g(p.draft_weights_per_gpu):>16}  (replicated)")
    lines += [f"  {'total':<16}{_g(p.weights.total_bytes)}{_g(p.weights_per_gpu_bytes):>16}", ""]
    lines.append("KV per token per GPU:")
    for k in p.kv.parts:
        said = [k.note] if k.note else []
        said += [f"a {k.window:,}-token window + the tokens in flight, once a sequence"] if k.window else []
        note = f" ({', '.join(said)})" if said else ""
        lines.append(f"  {k.name:<28}{k.bytes_per_token:>12,.0f} B  {k.layers} layers{note}")
    lines.append(f"  {'total, every token':<28}{p.kv.bytes_per_token:>12,.0f} B")
    if p.kv.parts and abs(p.vllm_kv_bytes_per_token - p.kv.bytes_per_token) >= 0.5:
        lines.append(
            f"  {'as vLLM logs it':<28}{p.vllm_kv_bytes_per_token:>12,.1f} B  (its pool over its token count at "
            f"max_model_len {s.max_model_len:,}: windows charged once a sequence)"
        )
    lines.append("")
    how = (
        "explicit"
        if s.explicit_kv_bytes or s.plan_sets_kv_bytes
        else "CPU KV space"
        if s.platform == "cpu"
        else "vLLM's sizing"
    )
    lines += [
        "memory per GPU:",
        f"  device                       {_g(s.device_bytes)}",
        f"  vLLM may use                 {_g(p.requested_bytes)}  (gpu_memory_utilization {s.gpu_memory_utilization:g})",
        f"  weights                      {_g(p.weights_per_gpu_bytes)}",
        f"  left after weights           {_g(p.left_after_weights_bytes)}",
        f"  activation peak (profiled)   {_g(p.activation_bytes)}",
        f"  non-torch memory             {_g(p.non_torch_bytes)}",
        f"  workspaces at max_model_len  {_g(p.workspace_bytes)}  (not seen by vLLM's profile run)",
        f"  CUDA graphs                  {_g(p.graph_bytes)}"
        + ("  (taken before the pool)" if p.graph_bytes and s.graphs_before_pool else ""),
        *([f"  expert-parallel KV cut        {_g(s.ep_kv_cut_bytes)}"] if s.ep_kv_cut_bytes else []),
        f"  {'KV pool (' + how + ')':<29}{_g(p.pool_bytes)}  = {p.pool_tokens:,} tokens as vLLM counts them",
        *(
            [f"  (gpu_memory_utilization alone {_g(p.vllm_pool_bytes)})"]
            if how == "explicit" and p.vllm_pool_bytes != p.pool_bytes
            else []
        ),
        f"  left                         {_g(p.left_bytes)}",
        "",
    ]
    if p.kv.parts:
        lines += [
            f"one sequence of {s.max_model_len:,} tokens: {p.seq_bytes_at_ctx / GIB:,.2f} GiB of KV; "
            f"{p.max_seqs_at_ctx} fit at once"
            + (
                f" (vLLM's log will say {p.logged_seqs_at_ctx:,.1f}: it charges each group's pages at their own "
                "bytes, not in whole blocks)"
                if p.kv.layout is not None
                else ""
            ),
            f"largest max_model_len with {s.max_num_seqs} full-length sequences: {p.max_ctx_at_seqs:,} tokens",
        ]
    else:  # no attention geometry: how many fit is unknown, never "0"
        lines.append("sequences that fit: unknown (the recipe gives no attention geometry; --checkpoint reads it)")
    if s.plan_sets_kv_bytes and p.fits and p.pool_bytes > 0:
        lines.append(f"launch renders --kv-cache-memory-bytes {p.pool_bytes}")
    for w in p.warnings:
        lines.append(f"warning: {w}")
    lines.append("assumptions:")
    lines += [f"  - {a}" for a in p.assumptions]
    return "\n".join(lines) + "\n"
