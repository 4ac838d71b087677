"""Generated files (schema, docs, bucket files): one generate-or-`--check` mode for all of them.

Without --check every stale file is written atomically and every obsolete one removed.
With --check nothing is written: each stale file's unified diff goes to stderr, and the
command fails (exit 1) naming the files and the command that regenerates them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path

import click

from cookbook.errors import FAILED, CookbookError
from cookbook.files import atomic_write, repo_root

DIFF_LINES = 100  # per file; a longer diff is cut (the command to run is the fix either way)


def shown(path: Path) -> str:
    """`path` relative to the checkout root when it lies inside it."""
    try:
        return str(path.resolve().relative_to(repo_root().resolve()))
    except ValueError:
        return str(path)


def stale_diff(path: Path, current: str, text: str, limit: int = DIFF_LINES) -> str:
    """The unified diff from the file as it is to the file as generated (at most `limit` lines)."""
    lines = list(difflib.unified_diff(current.splitlines(), text.splitlines(), shown(path), "generated", lineterm=""))
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more diff lines)"]
    return "\n".join(lines)


def write_or_check(outputs: Mapping[Path, str], *, check: bool, command: str, obsolete: Iterable[Path] = ()) -> int:
    """Bring every file of `outputs` up to date (remove each `obsolete` one), or with `check`
    raise CookbookError (exit 1) when any differs. Returns how many files are up to date."""
    stale: list[Path] = []
    for path, text in outputs.items():
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current == text:
            continue
        if check:
            click.echo(stale_diff(path, current, text), err=True)
            stale.append(path)
        else:
            atomic_write(path, text)
            click.echo(f"{shown(path)}: written")
    for path in obsolete:
        if check:
            click.echo(f"{shown(path)}: would be removed (nothing generates it)", err=True)
            stale.append(path)
        else:
            path.unlink()
            click.echo(f"{shown(path)}: removed (nothing generates it)")
    if stale:
        names = ", ".join(shown(p) for p in stale)
        verb = "is" if len(stale) == 1 else "are"
        raise CookbookError(f"{names} {verb} stale; run `{command}` and commit the result", exit_code=FAILED)
    return len(outputs)
