"""How many sequences vLLM keeps running at once without preempting one: at max_model_len (full
length), and at the recipe's typical request (`plan.traffic`: prompt + output tokens).

What a running sequence holds, as vLLM 0.26.0 allocates it:

- a full-attention cache: every token it has, in whole blocks;
- a sliding-window cache (DeepSeek-V4's windows and compressor states, Gemma's local layers): its
  window and its own unprocessed tokens, in whole blocks, + 1 block. Pages that fall out of the
  window are freed once the step that wrote past them is processed
  (v1/core/kv_cache_manager.py `KVCacheManager.allocate_slots` calls `remove_skipped_blocks` with
  `total_computed_tokens - request.num_in_flight_tokens`; v1/core/single_type_kv_cache_manager.py
  `SlidingWindowManager.get_num_skipped_tokens`), and each step allocates pages only for the tokens it
  schedules (`allocate_slots`: `num_tokens_need_slot`).

The tokens scheduled but not yet processed are bounded for the whole batch, not per sequence:
`VllmConfig.max_in_flight_tokens` (config/vllm.py) = max_num_batched_tokens x the concurrent batches
(2 with async scheduling), and every request's `num_in_flight_tokens` (v1/core/sched/scheduler.py)
comes out of that budget. So the window pages those tokens need are counted once for the batch here.

vLLM charges each sequence the whole budget in two places only: its start-up figures
(`SlidingWindowSpec.max_memory_usage_bytes`, v1/kv_cache_interface.py; "Maximum concurrency" and
`_max_memory_usage_bytes_from_groups`, which the plan's `max_seqs_at_ctx` reproduces) and the
admission gate of a *waiting* request (`Scheduler.schedule` passes
`full_sequence_must_fit=scheduler_reserve_full_isl`; `get_num_blocks_to_allocate(...,
apply_admission_cap=True)` caps each window group at `SlidingWindowSpec.max_admission_blocks_per_request`:
`window - 1 + max_in_flight_tokens` tokens). A running sequence is never held to it; one is preempted
only when a step's pages cannot be allocated (`Scheduler.schedule`, `_preempt_request`).

The bound here: n sequences fit when n x (what each holds at its length) + the batch's in-flight
window pages <= the pool. It is at least what the admission gate needs for the n-th sequence, since
admission(L) - held(L) is at most the in-flight pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from cookbook.plan import kv as K


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Concurrency:
    """Sequences of `tokens` each that the pool holds at once, with no preemption."""

    tokens: int
    held_bytes: float  # what one running sequence of `tokens` holds
    in_flight_bytes: float  # the batch's unprocessed tokens' window pages, counted once
    seqs: int


def decode_in_flight(batches: int, spec_tokens: int) -> int:
    """A decoding sequence's own unprocessed tokens: its next token and its draft tokens, in each
    batch in flight."""
    return batches * (1 + max(0, spec_tokens))


def _held_layout(lay, tokens: int, own: int) -> tuple[int, int]:
    """(blocks one sequence holds, blocks the batch's in-flight tokens add) in DeepSeek-V4's layout."""
    held = extra = 0
    for g in lay.groups:
        page = g.pages[0]
        if page.window is None:
            held += _cdiv(tokens, page.block_size)
        else:
            held += _cdiv(min(page.window - 1 + own, tokens), page.block_size) + 1
            extra += _cdiv(lay.in_flight_tokens, page.block_size)
    return held, extra


def _held_parts(kv: K.KV, tokens: int, own: int) -> tuple[float, float]:
    """(bytes one sequence holds, bytes the batch's in-flight tokens add) for per-token parts."""
    held = float(kv.per_seq_fixed_bytes)
    extra = 0.0
    for p in (q for q in kv.parts if q.in_pool):
        if not p.window:
            held += p.bytes_per_token * tokens
            continue
        held += p.bytes_per_token * (_cdiv(min(p.window - 1 + own, tokens), p.block_size) + 1) * p.block_size
        extra += p.bytes_per_token * _cdiv(kv.in_flight_tokens, p.block_size) * p.block_size
    return held, extra


def at_length(kv: K.KV, pool_bytes: float, tokens: int, own_in_flight: int) -> Concurrency | None:
    """Sequences of `tokens` each that `pool_bytes` holds at once; None without KV geometry."""
    if not kv.parts or tokens < 1:
        return None
    if kv.layout is not None:
        lay = kv.layout
        held, extra = _held_layout(lay, tokens, own_in_flight)
        blocks = lay.blocks(pool_bytes)
        seqs = max(0, (blocks - extra) // held) if held else 0
        return Concurrency(tokens, held * lay.block_bytes, extra * lay.block_bytes, int(seqs))
    held_b, extra_b = _held_parts(kv, tokens, own_in_flight)
    seqs = int(max(0.0, pool_bytes - extra_b) // held_b) if held_b else 0
    return Concurrency(tokens, held_b, extra_b, seqs)
