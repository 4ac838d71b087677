"""A fix's patch re-based onto another release where only its line numbers moved (quilt's refresh
after a push with offset).

Each hunk's old lines (context and removed, verbatim) must occur exactly once in the new file after
the previous hunk; the refreshed patch is the same text with new `@@` line numbers and the DEP-3
Applies-To and Last-Update fields rewritten. Changed context (what patch(1) would take with fuzz) is
never accepted: that is a conflict for a person. The pack's applier stays exact (patchfile); this
module only writes a new patch that it then applies exactly.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cookbook.fixes import patchfile


@dataclass
class Moved:
    path: str
    hunk: int  # 1-based, within its file
    old_line: int
    new_line: int

    @property
    def offset(self) -> int:
        return self.new_line - self.old_line

    def __str__(self) -> str:
        return f"{self.path}: hunk {self.hunk} moved {self.offset:+d} (line {self.old_line} -> {self.new_line})"


class NotRefreshable(patchfile.PatchError):
    """A hunk whose lines are not in the new file exactly once: it needs a person."""


def _place(fp: patchfile.FilePatch, text: str) -> list[int]:
    """The new 1-based start line of each hunk's old lines; NotRefreshable names the first that has none."""
    lines = text.splitlines(keepends=True)
    starts, pos = [], 0
    for i, h in enumerate(fp.hunks, 1):
        n = len(h.old)
        if not n:
            raise NotRefreshable(f"{fp.path}: hunk {i} has no context lines to find")
        at = patchfile.find_block(lines, h.old, pos)
        if len(at) != 1:
            why = (
                "its lines changed"
                if not at
                else f"its lines occur {len(at)} times (lines {', '.join(str(a + 1) for a in at[:5])})"
            )
            raise NotRefreshable(f"{fp.path}: hunk {i} (@@ -{h.old_start},{n}): {why}")
        starts.append(at[0] + 1)
        pos = at[0] + n
    return starts


PATCH_MAX = 16 << 20  # bytes: a patch is text


def refresh(
    patch_path: Path, read: Callable[[str], str | None], applies_to: str, today: dt.date | None = None
) -> tuple[str, list[Moved]]:
    """The patch's text re-based on the files `read(path)` returns (a tree's, or the texts the
    profile's earlier fixes left), and the hunks that moved.

    Raises NotRefreshable when a hunk cannot be placed, PatchError when the patch cannot be read
    or the result would not apply exactly (it always should; the check keeps a bug from writing).
    """
    from cookbook.untrusted import read_regular

    try:  # a regular file only: a FIFO is refused, not waited on
        source = read_regular(patch_path, PATCH_MAX).decode("utf-8")
    except OSError as e:
        raise patchfile.PatchError(f"cannot read patch {patch_path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise patchfile.PatchError(f"{patch_path}: not UTF-8 text (a binary file is not a patch)") from None
    patch = patchfile.parse_text(source, patch_path)
    new_starts: list[list[int]] = []
    texts: dict[str, str] = {}
    for fp in patch.files:
        text = None if fp.creates else read(fp.path)
        if text is None:
            raise NotRefreshable(f"{fp.path}: {'the patch creates it' if fp.creates else 'absent in the new tree'}")
        texts[fp.path] = text
        new_starts.append(_place(fp, text))
    moved = [
        Moved(fp.path, i + 1, h.old_start, start)
        for fp, starts in zip(patch.files, new_starts)
        for i, (h, start) in enumerate(zip(fp.hunks, starts))
        if start != h.old_start
    ]
    flat = iter([(h, s) for fp, starts in zip(patch.files, new_starts) for h, s in zip(fp.hunks, starts)])
    day = (today or dt.datetime.now(dt.timezone.utc).date()).isoformat()
    out, in_header = [], True
    for line in source.splitlines(keepends=True):
        if line.startswith("--- "):
            in_header = False
        if in_header and line.startswith("Applies-To:"):
            line = f"Applies-To: {applies_to}\n"
        elif in_header and line.startswith("Last-Update:"):
            line = f"Last-Update: {day}\n"
        elif not in_header and (m := patchfile.HUNK_RE.match(line)):
            h, start = next(flat)
            old_len, new_len = ("," + c if c else "" for c in (m.group(2), m.group(4)))
            line = f"@@ -{start}{old_len} +{h.new_start + start - h.old_start}{new_len} @@" + line[m.end() :]
        out.append(line)
    text = "".join(out)
    _check_applies(text, patch_path, texts)
    return text, moved


def _check_applies(text: str, source: Path, texts: dict[str, str]) -> None:
    for fp in patchfile.parse_text(text, source).files:
        if patchfile.apply_to_text(fp, texts[fp.path]) is None:
            raise patchfile.PatchError(f"{source}: the refreshed patch does not apply to {fp.path} (a bug)")
