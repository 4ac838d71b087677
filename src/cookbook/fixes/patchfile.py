"""A fix's patch file: its DEP-3 header and an exact (zero-fuzz, zero-offset) applier.

A patch is a DEP-3 header followed by a unified diff whose paths are relative to the
`vllm` package directory (a/entrypoints/cli/main.py). Hunks must match the target at
exactly the line numbers they name: no fuzz, no offset search. The pinned tree is a
known release, so anything else is drift and is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REQUIRED_FIELDS = ("Description", "Origin", "Bug", "Forwarded", "Last-Update", "Applies-To", "Verified-By")
HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")  # old start, len, new start, len


class PatchError(Exception):
    """A patch file that cannot be read, or a patch that does not apply exactly."""


@dataclass
class Hunk:
    old_start: int  # 1-based; for an empty side, the line after which it goes
    new_start: int
    old: list[str]  # lines (with newline) the target must have
    new: list[str]  # lines that replace them


@dataclass
class FilePatch:
    path: str  # relative to the package dir
    hunks: list[Hunk]
    creates: bool = False  # --- /dev/null


@dataclass
class Patch:
    source: Path
    header: dict[str, str]
    files: list[FilePatch] = field(default_factory=list)

    @property
    def summary(self) -> str:
        return self.header.get("Description", "").splitlines()[0].strip() if self.header.get("Description") else ""


def _strip_prefix(path: str) -> str:
    path = path.split("\t")[0].strip()
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse_header(lines: list[str]) -> dict[str, str]:
    """DEP-3 fields: `Key: value` with continuation lines starting with a space."""
    header: dict[str, str] = {}
    key = None
    for line in lines:
        if line.startswith((" ", "\t")) and key:
            cont = line.strip()
            header[key] += "\n" + ("" if cont == "." else cont)
        elif ":" in line and not line.startswith(" "):
            key, _, value = line.partition(":")
            key = key.strip()
            header[key] = value.strip()
        elif not line.strip():
            key = None
    return header


def parse(path: Path) -> Patch:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise PatchError(f"cannot read patch {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise PatchError(f"patch {path} is not UTF-8 text (byte {e.start})") from None
    return parse_text(text, path)


def parse_text(text: str, path: Path) -> Patch:
    """The patch in `text`; `path` names it in errors and is its `source`."""
    lines = text.splitlines(keepends=True)
    first_diff = next((i for i, ln in enumerate(lines) if ln.startswith("--- ")), None)
    if first_diff is None:
        raise PatchError(f"{path}: no unified diff (no '--- ' line) after the DEP-3 header")
    header_lines = [
        ln.rstrip("\n") for ln in lines[:first_diff] if not ln.startswith(("diff ", "index ", "Index:", "==="))
    ]
    header = parse_header(header_lines)
    missing = [f for f in REQUIRED_FIELDS if not header.get(f)]
    if missing:
        raise PatchError(f"{path}: DEP-3 header lacks {', '.join(missing)}")
    patch = Patch(source=path, header=header)
    i = first_diff
    while i < len(lines):
        line = lines[i]
        if not line.startswith("--- "):
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise PatchError(f"{path}:{i + 1}: '--- ' line without a '+++ ' line")
        old_name, new_name = line[4:].rstrip("\n"), lines[i + 1][4:].rstrip("\n")
        creates = old_name.split("\t")[0].strip() == "/dev/null"
        if new_name.split("\t")[0].strip() == "/dev/null":
            raise PatchError(f"{path}:{i + 2}: deleting files is not supported")
        fp = FilePatch(path=_strip_prefix(new_name), hunks=[], creates=creates)
        i += 2
        while i < len(lines) and lines[i].startswith("@@"):
            m = HUNK_RE.match(lines[i])
            if not m:
                raise PatchError(f"{path}:{i + 1}: malformed hunk header")
            old_start, old_len = int(m.group(1)), int(m.group(2) or 1)
            new_start, new_len = int(m.group(3)), int(m.group(4) or 1)
            hunk = Hunk(old_start=old_start, new_start=new_start, old=[], new=[])
            i += 1
            while i < len(lines) and (len(hunk.old) < old_len or len(hunk.new) < new_len):
                body = lines[i]
                tag, content = body[:1], body[1:]
                if body.startswith("\\"):  # "\ No newline at end of file"
                    i += 1
                    continue
                if tag == " " or body == "\n":
                    content = content if tag == " " else "\n"
                    hunk.old.append(content)
                    hunk.new.append(content)
                elif tag == "-":
                    hunk.old.append(content)
                elif tag == "+":
                    hunk.new.append(content)
                else:
                    raise PatchError(f"{path}:{i + 1}: unexpected line in hunk: {body[:40]!r}")
                i += 1
            if len(hunk.old) != old_len or len(hunk.new) != new_len:
                raise PatchError(f"{path}: hunk at line {old_start} of {fp.path} is truncated")
            while i < len(lines) and lines[i].startswith("\\"):
                i += 1
            fp.hunks.append(hunk)
        patch.files.append(fp)
    if not patch.files:
        raise PatchError(f"{path}: the diff names no file")
    return patch


def find_block(lines: list[str], block: list[str], start: int = 0) -> list[int]:
    """Every 0-based index from `start` where `lines` holds `block` verbatim."""
    n = len(block)
    return [j for j in range(start, len(lines) - n + 1) if lines[j : j + n] == block] if n else []


def _apply_hunks(text: str, hunks: list[Hunk], reverse: bool) -> str | None:
    """Apply hunks at their exact line numbers; None when any hunk does not match."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    pos = 0
    for h in hunks:
        want, put = (h.new, h.old) if reverse else (h.old, h.new)
        line_no = h.new_start if reverse else h.old_start
        start = line_no - 1 if want else line_no
        if start < pos or lines[start : start + len(want)] != want:
            return None
        out.extend(lines[pos:start])
        out.extend(put)
        pos = start + len(want)
    out.extend(lines[pos:])
    return "".join(out)


def apply_to_text(fp: FilePatch, text: str | None) -> str | None:
    """The patched text, or None when the patch does not apply exactly."""
    if fp.creates:
        return "".join(fp.hunks[0].new) if text is None else None
    if text is None:
        return None
    return _apply_hunks(text, fp.hunks, reverse=False)


def is_present_in(fp: FilePatch, text: str | None) -> bool:
    """True when the file already holds the patch's result (the patch reverses exactly)."""
    if fp.creates:
        return text is not None and text == "".join(fp.hunks[0].new)
    return text is not None and _apply_hunks(text, fp.hunks, reverse=True) is not None


def sort_files(patch: Patch, texts: dict[str, str | None]) -> tuple[dict[str, str], list[str], list[str]]:
    """Each file of `patch` against `texts[path]` (the caller loads them; None: absent): the patched
    texts of those it applies to exactly, the files that already hold its change, and the rest."""
    results: dict[str, str] = {}
    present: list[str] = []
    failed: list[str] = []
    for fp in patch.files:
        new = apply_to_text(fp, texts[fp.path])
        if new is not None:
            results[fp.path] = new
        elif is_present_in(fp, texts[fp.path]):
            present.append(fp.path)
        else:
            failed.append(fp.path)
    return results, present, failed
