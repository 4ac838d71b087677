"""A recipe's `verified:` block: the status words, what the block alone says, and writing it.

The block is the last top-level key of recipe.yaml. Writing replaces everything from the
line `verified:` to the end of the file (or appends), so the rest of the file, comments
included, stays as written. Only `cookbook gates verify` calls this, with a block it built
from an all-passed evidence bundle (cookbook.evidence.verify decides whether it may).

Whether a recipe is verified is answered by the evidence wing (cookbook.evidence.status), which
re-checks the bundle the block names; the recipe package knows only the words and whether the
block is current (block_status), so `cookbook lint` can say `stale` without that wing.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from cookbook.files import atomic_write

_VERIFIED_LINE = re.compile(r"^verified:", re.MULTILINE)

VERIFIED, STALE, UNVERIFIED = "verified", "stale", "unverified"
BUNDLE_MISSING, BUNDLE_REFUSED = "unverified (bundle missing)", "unverified (bundle refused)"
# A benchmark-only recipe (gates.benchmark_only): never verified, whatever block it holds.
BENCHMARK = "benchmark"
STATUSES = (VERIFIED, STALE, UNVERIFIED, BUNDLE_MISSING, BUNDLE_REFUSED, BENCHMARK)


def block_status(resolved) -> str | None:
    """What the verified block alone says: BENCHMARK (a benchmark-only recipe), UNVERIFIED (there is
    none), STALE (its recipe_hash is not the recipe's content hash), or None: current, so only its
    bundle's re-check can tell."""
    if resolved.recipe.gates.benchmark_only:
        return BENCHMARK
    block = resolved.recipe.verified
    if block is None:
        return UNVERIFIED
    if block.recipe_hash != resolved.content_hash:
        return STALE
    return None


def render_block(block: dict) -> str:
    text = yaml.safe_dump({"verified": block}, sort_keys=False, default_flow_style=False, width=100)
    return "# written by `cookbook gates verify` from an evidence bundle; do not edit by hand\n" + text


def with_block(recipe_text: str, block: dict) -> str:
    """recipe.yaml text with its verified block replaced (from `verified:` to EOF) or appended."""
    m = _VERIFIED_LINE.search(recipe_text)
    if m:
        rest = recipe_text[m.end() :]
        later = re.search(r"^[A-Za-z_][\w-]*:", rest, re.MULTILINE)
        if later:
            raise ValueError(
                f"`verified:` must be the last top-level key, but {later.group(0)!r} follows it; "
                "move that key above `verified:`"
            )
    head = recipe_text[: m.start()] if m else recipe_text
    head = re.sub(r"# written by `cookbook gates verify`[^\n]*\n\Z", "", head)
    if head and not head.endswith("\n"):
        head += "\n"
    return head + render_block(block)


def write_verified(recipe_path: Path, block: dict) -> None:
    new = with_block(recipe_path.read_text(encoding="utf-8"), block)
    atomic_write(recipe_path, new)
