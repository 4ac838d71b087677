"""`cookbook plan` output: a table per GPU, or JSON (PLAN_JSON_SCHEMA describes it)."""

from __future__ import annotations

from cookbook.plan.budget import Plan
from cookbook.units import GIB, gib
from cookbook.untrusted import printable

PLAN_JSON_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "cookbook plan --json",
    "$defs": {
        "concurrency": {
            "type": ["object", "null"],
            "required": ["tokens", "seqs", "held_bytes", "in_flight_bytes"],
            "properties": {"seqs": {"type": "integer", "minimum": 0}, "tokens": {"type": "integer", "minimum": 1}},
        }
    },
    "type": "object",
    "required": [
        "recipe",
        "quant",
        "fits",
        "setup",
        "weights",
        "kv",
        "memory",
        "fit",
        "concurrency",
        "refusals",
        "warnings",
    ],
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
        "concurrency": {
            "type": "object",
            "description": "Sequences running at once with no preemption (plan/concurrency.py): at max_model_len "
            "and at the recipe's typical request (null where it states none or the KV geometry is unknown)",
            "required": ["in_flight_tokens", "full_length", "typical", "traffic"],
            "properties": {
                "full_length": {"$ref": "#/$defs/concurrency"},
                "typical": {"$ref": "#/$defs/concurrency"},
            },
        },
        "refusals": {"type": "array", "items": {"type": "string"}},
        "warnings": {"type": "array", "items": {"type": "string"}},
        "assumptions": {"type": "array", "items": {"type": "string"}},
    },
}


def _conc_json(c) -> dict | None:
    if c is None:
        return None
    return {"tokens": c.tokens, "seqs": c.seqs, "held_bytes": c.held_bytes, "in_flight_bytes": c.in_flight_bytes}


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
        "concurrency": {
            "in_flight_tokens": s.in_flight_tokens,
            "full_length": _conc_json(p.full_length),
            "typical": _conc_json(p.typical),
            "traffic": (
                {
                    "prompt_tokens": p.traffic.prompt_tokens,
                    "output_tokens": p.traffic.output_tokens,
                    "concurrency": p.traffic.concurrency,
                    "source": p.traffic.source,
                }
                if p.traffic is not None
                else None
            ),
        },
        "refusals": p.refusals,
        "warnings": p.warnings,
        "assumptions": p.assumptions,
    }


def _size(n: float) -> str:
    return f"{n / GIB:,.2f} GiB" if n >= GIB else f"{n / 2**20:,.1f} MiB"


def concurrency_lines(p: Plan) -> list[str]:
    """The two concurrency figures (plan/concurrency.py): full length and the typical request."""
    s, full = p.setup, p.full_length
    if full is None:
        return []
    windows = f" (the {s.in_flight_tokens:,} tokens in flight across the batch counted once)"
    out = ["sequences running at once with no preemption" + (windows if full.in_flight_bytes else "") + ":"]

    def row(label: str, c) -> str:
        extra = f", + {_size(c.in_flight_bytes)} once for the tokens in flight" if c.in_flight_bytes else ""
        cap = f"; max_num_seqs {s.max_num_seqs} caps it" if c.seqs > s.max_num_seqs else ""
        return f"  {label}: {c.seqs:,} ({_size(c.held_bytes)} each{extra}){cap}"

    out.append(row(f"full length, {full.tokens:,} tokens", full))
    t, typ = p.traffic, p.typical
    if typ is not None and t is not None:
        capped = " (capped at max_model_len)" if typ.tokens < t.prompt_tokens + t.output_tokens else ""
        out.append(row(f"typical request, {t.prompt_tokens:,} + {t.output_tokens:,} tokens{capped}", typ))
        out.append(f"    typical request from: {printable(t.source)}")
    else:
        out.append("  typical request: the recipe states none (plan.traffic)")
    return out


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
        lines.append(
            f"  {g.name:<16}{gib(g.bytes, 10)}{gib(p.weights_per_gpu.get(g.name, 0), 10):>16}  {bits:>11}  {kinds}"
        )
    if p.draft_weights_per_gpu:
        lines.append(f"  {'draft model':<16}{'':>14}{gib(p.draft_weights_per_gpu, 10):>16}  (replicated)")
    lines += [f"  {'total':<16}{gib(p.weights.total_bytes, 10)}{gib(p.weights_per_gpu_bytes, 10):>16}", ""]
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
        f"  device                       {gib(s.device_bytes, 10)}",
        f"  vLLM may use                 {gib(p.requested_bytes, 10)}  (gpu_memory_utilization {s.gpu_memory_utilization:g})",
        f"  weights                      {gib(p.weights_per_gpu_bytes, 10)}",
        f"  left after weights           {gib(p.left_after_weights_bytes, 10)}",
        f"  activation peak (profiled)   {gib(p.activation_bytes, 10)}",
        f"  non-torch memory             {gib(p.non_torch_bytes, 10)}",
        f"  workspaces at max_model_len  {gib(p.workspace_bytes, 10)}  (not seen by vLLM's profile run)",
        f"  CUDA graphs                  {gib(p.graph_bytes, 10)}"
        + ("  (taken before the pool)" if p.graph_bytes and s.graphs_before_pool else ""),
        *([f"  expert-parallel KV cut        {gib(s.ep_kv_cut_bytes, 10)}"] if s.ep_kv_cut_bytes else []),
        f"  {'KV pool (' + how + ')':<29}{gib(p.pool_bytes, 10)}  = {p.pool_tokens:,} tokens as vLLM counts them",
        *(
            [f"  (gpu_memory_utilization alone {gib(p.vllm_pool_bytes, 10)})"]
            if how == "explicit" and p.vllm_pool_bytes != p.pool_bytes
            else []
        ),
        f"  left                         {gib(p.left_bytes, 10)}",
        "",
    ]
    if p.kv.parts:
        lines += [
            (
                f"one sequence of {s.max_model_len:,} tokens: {gib(p.seq_bytes_at_ctx)} of KV; "
                f"{p.max_seqs_at_ctx} fit at once"
            )
            if p.kv.layout is None
            else (
                f"vLLM's start-up check charges one sequence of {s.max_model_len:,} tokens "
                f"{gib(p.seq_bytes_at_ctx)} (window pages for every token in flight): {p.max_seqs_at_ctx} "
                f"if each held that (its log will say {p.logged_seqs_at_ctx:,.1f}: it charges each group's pages at "
                "their own bytes, not in whole blocks)"
            ),
            f"largest max_model_len with {s.max_num_seqs} full-length sequences: {p.max_ctx_at_seqs:,} tokens",
        ]
        lines += concurrency_lines(p)
    else:  # no attention geometry: how many fit is unknown, never "0"
        lines.append("sequences that fit: unknown (the recipe gives no attention geometry; --checkpoint reads it)")
    if s.plan_sets_kv_bytes and p.fits and p.pool_bytes > 0:
        lines.append(f"launch renders --kv-cache-memory-bytes {p.pool_bytes}")
    for w in p.warnings:
        lines.append(f"warning: {w}")
    lines.append("assumptions:")
    lines += [f"  - {a}" for a in p.assumptions]
    return "\n".join(lines) + "\n"
