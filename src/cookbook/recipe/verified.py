"""Write a recipe's `verified:` block into its recipe.yaml.

The block is the last top-level key of recipe.yaml. Writing replaces everything from the
line `verified:` to the end of the file (or appends), so the rest of the file, comments
included, stays as written. Only `cookbook gates verify` calls this, with a block it built
from an all-passed evidence bundle (cookbook.gates.verify decides whether it may).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from cookbook.files import atomic_write

_VERIFIED_LINE = re.compile(r"^verified:", re.MULTILINE)


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
