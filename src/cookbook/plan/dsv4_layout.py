"""DeepSeek-V4's KV cache as vLLM 0.26.0 lays it out, and what one sequence costs in it.

vLLM 0.26.0 keeps DeepSeek-V4's caches in several KV-cache groups that share one pool of blocks
(v1/core/kv_cache_utils.py, `group_and_unify_kv_cache_specs`, `_get_kv_cache_groups_uniform_groups`,
`_get_kv_cache_config_packed`), each layer's page padded to a 576-byte multiple:

- the "full" group: every compressed layer's latent (one 584-byte entry per `ratio` tokens, in
  blocks of `block_size` tokens) and the ratio-4 layers' indexer keys (132 bytes per 4 tokens);
- sliding-window groups: every layer's 128-token window of 584-byte entries (blocks of 64 tokens),
  and the compressors' float32 states (ratio 4: an 8-token window in blocks of 4 with the indexer
  compressor's beside it; ratio 128: a 128-token window in blocks of 8).

Groups are cut into "layer tuples" (one page of each size the full group has); every group gets
the same number of tuples, padded up (`_approximate_gcd`), and a block of the pool holds one page
slot per tuple position and size. A block id belongs to one group, so a group whose pages are
smaller than the block still uses the whole block.

What a sequence of L tokens reserves: the full group `ceil(L / block_size)` blocks; each sliding
group `ceil(min(window - 1 + in-flight tokens, L) / its block) + 1` blocks
(v1/kv_cache_interface.py, `SlidingWindowSpec.max_admission_blocks_per_request`; in-flight tokens
are max_num_batched_tokens times the concurrent batches: 2 with async scheduling,
config/vllm.py `max_in_flight_tokens`).

vLLM reports three figures from this layout, and they differ:

- `padded_seq_bytes`: `_max_memory_usage_bytes_from_groups`, the figure vLLM checks a max-length
  request against (every group's pages counted at the padded layer-tuple layout, i.e. in whole
  blocks): what a sequence really holds, and what the plan sizes max_num_seqs by;
- `logged_seq_bytes`: `get_max_concurrency_for_kv_cache_config` over the worker's groups, which
  counts each group's pages at their own bytes (not whole blocks): its "Maximum concurrency" and
  "GPU KV cache size: N tokens" log lines, so vLLM's KV bytes per token (pool / N) is this over L;
- `scheduler_seq_bytes`: the same function over the scheduler's copy of the groups, where each
  group keeps only its first layer's spec (`generate_scheduler_kv_cache_config`): what
  `vllm:cache_config_info`'s kv_cache_max_concurrency says. It measures blocks in the first
  layer's page (the indexer's 8,640 bytes), so it counts the other groups' 37,440-byte pages
  4.3 times over: a reporting artefact, not what the block pool allocates.

The numbers here were checked against vLLM 0.26.0's own log on the H200 (recipes/
dsv4-flash-8x-h200/evidence/engine-check/: 8 layers, 1,048,576 tokens; 675,591 blocks,
"Maximum concurrency 66.20x", kv_cache_max_concurrency 32.94): the three figures reproduce them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# Bytes of one token's entry in DeepSeek-V4's fp8_ds_mla cache: 448 fp8 NoPE values, 64 BF16 RoPE
# values (128 B) and 8 B of ue8m0 scales (vLLM 0.26.0 v1/kv_cache_interface.py,
# MLAAttentionSpec.real_page_size_bytes, model_version "deepseek_v4").
DSV4_ENTRY_BYTES = 584
# Every DeepSeek-V4 page is rounded up to a multiple of 576 bytes with the fp8_ds_mla layout, 512 with
# a plain one (models/deepseek_v4/attention.py, compressor.py, v1/attention/backends/mla/sparse_swa.py:
# `alignment=576 if uses_fp8_ds_mla_layout else 512`).
FP8_DS_MLA_ALIGNMENT, PLAIN_ALIGNMENT = 576, 512
# The sliding-window cache's block is 64 tokens (sparse_swa.py, DeepseekV4SWACache: "the C4A KV block
# shape [256//4, head_dim] determines the SWA block size of 64").
SWA_BLOCK = 64
# Compressor states: float32, kv + score of coff x head_dim each (coff 2 for ratio 4, which overlaps
# its windows, else 1), an overlap window of coff x ratio tokens, in blocks of 4 (ratio 4) or 8
# (ratio 128) tokens (models/deepseek_v4/compressor.py, CompressorStateCache and DeepseekCompressor).
STATE_BLOCK = {4: 4, 128: 8}
STATE_BYTES_PER_VALUE = 4
# Async scheduling keeps two batches in flight (config/vllm.py, max_concurrent_batches, pp 1).
ASYNC_BATCHES = 2


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(x: int, m: int) -> int:
    return _cdiv(x, m) * m


@dataclass(frozen=True)
class Page:
    """One layer's cache as vLLM 0.26.0 specs it."""

    name: str
    page_bytes: int  # padded to the alignment
    block_size: int  # tokens a block covers
    window: int | None = None  # None: a full (growing) cache

    def pages_for(self, tokens: int, in_flight: int) -> int:
        if self.window is None:
            return _cdiv(tokens, self.block_size)
        return _cdiv(min(self.window - 1 + in_flight, tokens), self.block_size) + 1


@dataclass
class Group:
    pages: list[Page]
    block_size: int
    window: int | None

    @property
    def page_bytes(self) -> int:
        return sum(p.page_bytes for p in self.pages)

    def tuples(self) -> int:
        return Counter(p.page_bytes for p in self.pages).most_common(1)[0][1]


@dataclass
class Layout:
    groups: list[Group]
    block_bytes: int  # one block of the pool: every page slot of every size
    layer_tuple_bytes: int
    num_layer_tuples: int
    in_flight_tokens: int
    notes: list[str] = field(default_factory=list)

    def pages(self, tokens: int) -> list[int]:
        return [g.pages[0].pages_for(tokens, self.in_flight_tokens) for g in self.groups]

    def padded_seq_bytes(self, tokens: int) -> int:
        """`_max_memory_usage_bytes_from_groups`: what one sequence of `tokens` holds."""
        return sum(self.pages(tokens)) * self.num_layer_tuples * self.layer_tuple_bytes

    def logged_seq_bytes(self, tokens: int) -> int:
        """What vLLM's log charges a sequence ("Maximum concurrency", "GPU KV cache size")."""
        total = sum(n * g.page_bytes for n, g in zip(self.pages(tokens), self.groups))
        return _cdiv(total, self.groups[0].page_bytes) * self.block_bytes

    def scheduler_seq_bytes(self, tokens: int) -> int:
        """What vllm:cache_config_info's kv_cache_max_concurrency charges a sequence."""
        first = [g.pages[0].page_bytes for g in self.groups]
        total = sum(n * f for n, f in zip(self.pages(tokens), first))
        return _cdiv(total, first[0]) * self.block_bytes

    def blocks(self, pool_bytes: int) -> int:
        return int(pool_bytes // self.block_bytes)


def _approximate_gcd(values: list[int], lower_bound: int) -> int:
    """The tuple count per group that pads the groups least (ties: the larger), as vLLM picks it."""
    best_d, best_pad = lower_bound, None
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best_d):
            best_d, best_pad = d, pad
    return best_d


def layer_pages(
    ratios: list[int],
    *,
    head_dim: int,
    indexer_head_dim: int | None,
    window: int,
    block_size: int,
    fp8_ds_mla: bool,
    value_bytes: float = 1.0,
) -> list[Page]:
    """Every cache DeepSeek-V4's layers register, in vLLM's registration order (a ratio-4 layer:
    its indexer's keys and compressor state, its window, its latent, its compressor state)."""
    align = FP8_DS_MLA_ALIGNMENT if fp8_ds_mla else PLAIN_ALIGNMENT

    def entry(tokens: int) -> int:  # latent / window entries of `tokens` tokens
        raw = tokens * DSV4_ENTRY_BYTES if fp8_ds_mla else int(tokens * head_dim * value_bytes)
        return _round_up(raw, align)

    def state(ratio: int, dim: int) -> Page:
        coff = 2 if ratio == 4 else 1
        blk = STATE_BLOCK[ratio]
        return Page(
            "compressor state", _round_up(blk * 2 * coff * dim * STATE_BYTES_PER_VALUE, align), blk, coff * ratio
        )

    out: list[Page] = []
    for r in ratios:
        if r == 4 and indexer_head_dim:
            # fp8 keys and one fp32 scale per 128 values (attention.py, DeepseekV4Indexer: 128 + 4 = 132 B)
            key = indexer_head_dim + 4 * _cdiv(indexer_head_dim, 128)
            out.append(Page("DSA indexer keys", _round_up(block_size // 4 * key, align), block_size))
            out.append(state(4, indexer_head_dim))
        out.append(Page("sliding window", entry(SWA_BLOCK), SWA_BLOCK, window))
        if r > 1:
            out.append(Page("compressed latent", entry(block_size // r), block_size))
            if r in STATE_BLOCK:
                out.append(state(r, head_dim))
    return out


def layout(pages: list[Page], *, in_flight_tokens: int) -> Layout:
    """vLLM 0.26.0's grouping of DeepSeek-V4's pages, the layer-tuple padding and the packed block."""
    full = [p for p in pages if p.window is None]
    sliding: dict[tuple[int, int], list[Page]] = {}
    for p in pages:
        if p.window is not None:
            sliding.setdefault((p.block_size, p.window), []).append(p)
    if not full:
        raise ValueError("DeepSeek-V4 layout without a compressed layer")
    full_group = Group(full, full[0].block_size, None)
    full_sizes = sorted({p.page_bytes for p in full})
    tuple_counts = [full_group.tuples()] + [Group(v, k[0], k[1]).tuples() for k, v in sliding.items()]
    n_tuples = _approximate_gcd(tuple_counts, lower_bound=tuple_counts[0])
    groups = [full_group]
    for (blk, win), members in sliding.items():
        by_size: dict[int, list[Page]] = {}
        for p in members:  # each page padded to the nearest full-group page size at or above it
            size = min((s for s in full_sizes if s >= p.page_bytes), default=p.page_bytes)
            by_size.setdefault(size, []).append(Page(p.name, size, p.block_size, p.window))
        per_size = len(next(iter(by_size.values())))
        split = _cdiv(per_size, n_tuples)
        rows = list(zip(*by_size.values()))
        for i in range(split):
            groups.append(Group([p for row in rows[i::split] for p in row], blk, win))
    slots: dict[int, int] = {}
    for g in groups:
        for size, n in Counter(p.page_bytes for p in g.pages).items():
            slots[size] = max(slots.get(size, 0), n)
    return Layout(
        groups=groups,
        block_bytes=sum(size * n for size, n in slots.items()),
        layer_tuple_bytes=sum(full_sizes),
        num_layer_tuples=max(g.tuples() for g in groups),
        in_flight_tokens=in_flight_tokens,
    )
