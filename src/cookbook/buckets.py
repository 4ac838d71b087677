"""Gaudi warm-up buckets: generate a VLLM_BUCKETING_FROM_FILE file from a serving geometry,
and check such a file.

vllm-gaudi pads every forward pass to a prepared (batch_size, query_len, context_blocks)
shape; shapes it did not warm up are compiled while serving. With VLLM_BUCKETING_FROM_FILE
it reads the shapes from a file instead of generating them. This module reproduces
vllm-gaudi's default *exponential* strategy for a geometry (max seqs, context, block size,
batched tokens, KV blocks) and adds the extra rows a recipe asks for (e.g. a decode row at
batch size 3), so the committed file is derived, not hand-written. serving/buckets/README.md
names the vllm-gaudi sources this follows.

A spec is a small YAML file under serving/buckets/ naming the geometry and the output path;
`cookbook buckets generate` writes the outputs, `--check` fails when one is stale, and
`cookbook buckets check FILE` validates a bucket file's format (vllm-gaudi skips a malformed
line with only a print, so a typo silently removes shapes).
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from pathlib import Path

from cookbook.errors import CookbookError

LONG_CTX_THRESHOLD = 8192  # vllm-gaudi: prompts of long-context models get edge-ctx buckets
MAX_FILE_BYTES = 1 << 20
MAX_ROWS = 10_000

Bucket = tuple[int, int, int]


class BucketError(CookbookError, ValueError):
    """A bad spec or bucket file; the message names the file, line and fix."""


SPEC_HELP = "see serving/buckets/README.md for the spec format"


@dataclass(frozen=True)
class Geometry:
    """What the server runs with; every field is a vLLM/vllm-gaudi quantity."""

    block_size: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_blocks: int  # the KV pool in blocks (vllm-gaudi's num_hpu_blocks)
    max_num_prefill_seqs: int = 1  # vllm-gaudi's HPU runner prefills one sequence per step
    extra_decode_batch_sizes: tuple[int, ...] = ()

    def __post_init__(self):
        for name in (
            "block_size",
            "max_model_len",
            "max_num_seqs",
            "max_num_batched_tokens",
            "kv_cache_blocks",
            "max_num_prefill_seqs",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise BucketError(f"{name} must be a positive integer (got {value!r})")
        for bs in self.extra_decode_batch_sizes:
            if not isinstance(bs, int) or not 1 <= bs <= self.max_num_seqs:
                raise BucketError(
                    f"extra_decode_batch_sizes: {bs!r} is not within 1..max_num_seqs ({self.max_num_seqs})"
                )


# ---- vllm-gaudi's exponential strategy (default), for the non-contiguous-PA case ----------


def exponential_range(bmin: int, bstep: int, bmax: int, limit: int) -> list[int]:
    """vllm-gaudi `warmup_range_with_limit`: `limit` exponentially spaced values from bmin to
    bmax, rounded up to multiples of bstep, duplicates removed; a bmin of 0 or 1 is kept as
    an extra bucket and the ramp starts at bstep."""
    extra = None
    if bmin in (0, 1):
        extra, bmin = bmin, bstep
    if limit <= 1:
        return [bmax]
    values = set()
    for i in range(limit):
        unpadded = bmin * math.pow(bmax / bmin, (1.0 / float(limit - 1)) * i)
        values.add(math.ceil(unpadded / bstep) * bstep)
    if extra is not None:
        values.add(extra)
    out = sorted(values)
    if out and out[-1] > bmax:
        out[-1] = bmax
    return out


def _log2_limit(n: int) -> int:
    return math.ceil(math.log2(n)) + 1


def prompt_ranges(g: Geometry) -> tuple[list[int], list[int], list[int]]:
    bs = exponential_range(1, 2, g.max_num_prefill_seqs, _log2_limit(g.max_num_prefill_seqs))
    query = exponential_range(
        g.block_size, g.block_size, g.max_num_batched_tokens, math.ceil(math.log2(g.max_num_batched_tokens))
    )
    if g.max_model_len >= LONG_CTX_THRESHOLD:
        max_ctx = max(1, (g.max_model_len - g.max_num_batched_tokens) // g.block_size)
    else:
        max_ctx = max(1, (g.max_model_len - g.block_size) // g.block_size)
    ctx_limit = 2 if max_ctx == 1 else _log2_limit(max_ctx)
    return bs, query, exponential_range(0, 1, max_ctx, ctx_limit)


def decode_ranges(g: Geometry) -> tuple[list[int], list[int]]:
    bs = exponential_range(1, 2, g.max_num_seqs, _log2_limit(g.max_num_seqs))
    max_factor = int(g.kv_cache_blocks * g.max_num_seqs // 4)
    max_blocks = min(g.max_model_len // g.block_size * g.max_num_seqs, max_factor)
    ctx = exponential_range(1, g.max_num_seqs, max_blocks, _log2_limit(g.kv_cache_blocks))
    return bs, ctx


def prompt_ok(g: Geometry, b: Bucket) -> bool:
    bs, query, ctx = b
    return query + ctx * g.block_size <= g.max_model_len and bs * query <= g.max_num_batched_tokens


def decode_ok(g: Geometry, b: Bucket) -> bool:
    return b[0] <= b[2]


def decode_correct(g: Geometry, b: Bucket) -> Bucket:
    bs, query, ctx = b
    return bs, query, min(ctx, bs * math.ceil(g.max_model_len / g.block_size))


def prompt_buckets(g: Geometry) -> list[Bucket]:
    bs_range, query_range, ctx_range = prompt_ranges(g)
    top_ctx = max(ctx_range)
    out = set()
    for bs in bs_range:
        for ctx in ctx_range:
            for query in query_range:
                c = ctx
                if ctx == top_ctx and g.max_model_len >= LONG_CTX_THRESHOLD:
                    # the largest context is replaced by the most each query length allows
                    c = (g.max_model_len - query) // g.block_size
                if prompt_ok(g, (bs, query, c)):
                    out.add((bs, query, c))
    return sorted(out)


def decode_buckets(g: Geometry, batch_sizes: list[int] | None = None) -> list[Bucket]:
    bs_range, ctx_range = decode_ranges(g)
    out = set()
    for bs in batch_sizes or bs_range:
        for ctx in ctx_range:
            if decode_ok(g, (bs, 1, ctx)):
                out.add(decode_correct(g, (bs, 1, ctx)))
    return sorted(out)


# ---- the file format ----------------------------------------------------------------------


def _rows(buckets: list[Bucket]) -> list[tuple[int, int, list[int]]]:
    """Group (bs, query, ctx) buckets into one row per (bs, query) with a list of contexts."""
    rows: dict[tuple[int, int], list[int]] = {}
    for bs, query, ctx in buckets:
        rows.setdefault((bs, query), []).append(ctx)
    return [(bs, q, sorted(c)) for (bs, q), c in sorted(rows.items())]


def _fmt(row: tuple[int, int, list[int]]) -> str:
    bs, query, ctxs = row
    ctx = str(ctxs[0]) if len(ctxs) == 1 else "[" + ", ".join(map(str, ctxs)) + "]"
    return f"({bs}, {query}, {ctx})"


def render(g: Geometry, title: str, generated_by: str) -> str:
    p_bs, p_query, p_ctx = prompt_ranges(g)
    d_bs, d_ctx = decode_ranges(g)
    extra = [bs for bs in g.extra_decode_batch_sizes if bs not in d_bs]
    lines = [
        f"# {title}",
        f"# Generated by `{generated_by}`; do not edit (a test fails when it is stale).",
        "# Format: vllm-gaudi VLLM_BUCKETING_FROM_FILE, one (batch_size, query_len, context_blocks)",
        "# tuple per line; a list expands to the Cartesian product. query_len 1 is decode.",
        f"# Geometry: block_size {g.block_size}, max_model_len {g.max_model_len}, max_num_seqs {g.max_num_seqs},",
        f"#   max_num_batched_tokens {g.max_num_batched_tokens}, KV pool {g.kv_cache_blocks} blocks "
        f"({g.kv_cache_blocks * g.block_size} tokens), prefill batch {g.max_num_prefill_seqs}.",
        "# Default exponential buckets (vllm-gaudi's strategy for this geometry):",
        f"#   prompt bs {p_bs}, query {p_query},",
        f"#   context blocks {p_ctx} (the largest replaced by the most each query allows)",
        f"#   decode bs {d_bs}, context blocks {d_ctx}",
        "# Speculative decoding: vllm-gaudi adds the batch x (1 + k) decode buckets itself.",
        "",
        "# Prompt",
    ]
    lines += [_fmt(r) for r in _rows(prompt_buckets(g))]
    lines += ["", "# Decode (default)"]
    lines += [_fmt(r) for r in _rows(decode_buckets(g))]
    if extra:
        lines += ["", f"# Decode, extra batch sizes {extra}: requests at these counts are not padded up"]
        lines += [_fmt(r) for r in _rows(decode_buckets(g, extra))]
    return "\n".join(lines) + "\n"


def _ints(node: ast.AST, where: str) -> list[int]:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return [node.value]
    if isinstance(node, ast.List) and node.elts:
        out = []
        for e in node.elts:
            if not (isinstance(e, ast.Constant) and type(e.value) is int):
                raise BucketError(f"{where}: list items must be integers")
            out.append(e.value)
        return out
    if isinstance(node, ast.Call):
        raise BucketError(
            f"{where}: {ast.unparse(node)} is a call; vllm-gaudi reads lines with "
            "ast.literal_eval, which skips it. Write the values as a list"
        )
    raise BucketError(f"{where}: {ast.unparse(node)!r} is not an integer or a non-empty list of integers")


def parse(text: str, path: str = "<buckets>") -> tuple[list[Bucket], list[Bucket]]:
    """(prompt, decode) buckets of a bucket file. Rejects every line vllm-gaudi would skip."""
    if len(text.encode()) > MAX_FILE_BYTES:
        raise BucketError(f"{path}: larger than {MAX_FILE_BYTES} bytes; not a bucket file")
    prompt: list[Bucket] = []
    decode: list[Bucket] = []
    seen: dict[Bucket, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{n}"
        try:
            node = ast.parse(line, mode="eval").body
        except SyntaxError as exc:
            raise BucketError(f"{where}: not a Python tuple ({exc.msg}); write (bs, query, blocks)") from None
        if not isinstance(node, ast.Tuple) or len(node.elts) != 3:
            raise BucketError(f"{where}: expected a 3-tuple (batch_size, query_len, context_blocks)")
        dims = [_ints(e, where) for e in node.elts]
        for bs in dims[0]:
            for query in dims[1]:
                for ctx in dims[2]:
                    b = (bs, query, ctx)
                    if bs < 1 or query < 1 or ctx < 0:
                        raise BucketError(f"{where}: bucket {b}: batch and query must be >= 1, blocks >= 0")
                    if b in seen:
                        raise BucketError(f"{where}: bucket {b} repeats line {seen[b]}")
                    seen[b] = n
                    (decode if query == 1 else prompt).append(b)
                    if len(seen) > MAX_ROWS:
                        raise BucketError(f"{path}: more than {MAX_ROWS} buckets")
    if not prompt or not decode:
        raise BucketError(f"{path}: needs prompt and decode buckets (found {len(prompt)} prompt, {len(decode)} decode)")
    return sorted(prompt), sorted(decode)


def check_against(g: Geometry, prompt: list[Bucket], decode: list[Bucket], path: str) -> list[str]:
    """Buckets vllm-gaudi would drop or never use for this geometry."""
    problems = []
    for b in prompt:
        if not prompt_ok(g, b):
            problems.append(
                f"{path}: prompt bucket {b} exceeds max_model_len {g.max_model_len} or "
                f"max_num_batched_tokens {g.max_num_batched_tokens} (vllm-gaudi drops it)"
            )
        if b[0] > g.max_num_prefill_seqs:
            problems.append(f"{path}: prompt bucket {b} batches more than {g.max_num_prefill_seqs} prefill")
    for b in decode:
        if not decode_ok(g, b):
            problems.append(f"{path}: decode bucket {b} has fewer blocks than sequences (vllm-gaudi drops it)")
        if b[0] > g.max_num_seqs:
            problems.append(f"{path}: decode bucket {b} exceeds max_num_seqs {g.max_num_seqs}")
    return problems


# ---- specs --------------------------------------------------------------------------------


@dataclass
class Spec:
    path: Path
    title: str
    output: Path  # relative to the repo root
    geometry: Geometry
    recipe: str | None = None
    notes: list[str] = field(default_factory=list)


SPEC_KEYS = {"title", "output", "recipe", "geometry", "notes"}


def load_spec(path: Path, root: Path) -> Spec:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BucketError(f"{path}: cannot read the spec ({exc})", help=SPEC_HELP) from None
    if not isinstance(data, dict):
        raise BucketError(f"{path}: a bucket spec is a mapping with {', '.join(sorted(SPEC_KEYS))}", help=SPEC_HELP)
    unknown = set(data) - SPEC_KEYS
    if unknown:
        raise BucketError(
            f"{path}: unknown key(s) {', '.join(sorted(unknown))}; legal keys: {', '.join(sorted(SPEC_KEYS))}",
            help=SPEC_HELP,
        )
    for key in ("title", "output", "geometry"):
        if key not in data:
            raise BucketError(f"{path}: missing key {key!r}", help=SPEC_HELP)
    geo = dict(data["geometry"] or {})
    geo["extra_decode_batch_sizes"] = tuple(geo.get("extra_decode_batch_sizes") or ())
    try:
        geometry = Geometry(**geo)
    except TypeError as exc:
        raise BucketError(f"{path}: geometry: {exc}", help=SPEC_HELP) from None
    except BucketError as exc:
        raise BucketError(f"{path}: geometry: {exc}", help=SPEC_HELP) from None
    out = Path(data["output"])
    if out.is_absolute() or ".." in out.parts:
        raise BucketError(f"{path}: output must be a path inside the repository (got {out})", help=SPEC_HELP)
    return Spec(path, str(data["title"]), out, geometry, data.get("recipe"), list(data.get("notes") or []))


def specs_dir(root: Path) -> Path:
    return root / "serving" / "buckets"


def all_specs(root: Path) -> list[Spec]:
    return [load_spec(p, root) for p in sorted(specs_dir(root).glob("*.yaml"))]


def generated_text(spec: Spec, root: Path) -> str:
    rel = spec.path.relative_to(root) if spec.path.is_relative_to(root) else spec.path
    return render(spec.geometry, spec.title, f"cookbook buckets generate {rel}")
