"""The bundle's files against its manifest.json: each listed file present with its size and sha256,
no file or link that it does not list. A bundle without a manifest cannot be checked, so it is refused.
manifest.json is read once and its own sha256 taken from those bytes (the passed cache's key)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from cookbook.gates.bundle import MANIFEST, MANIFEST_FORMAT, bundle_files, sha256_file
from cookbook.gates.recorded import MAX_FILE_BYTES
from cookbook.untrusted import loads_json


def check_manifest(root: Path) -> list[str]:
    """Every listed file present with its size and sha256; nothing unlisted; no links."""
    return checked_manifest(root)[0]


def checked_manifest(root: Path) -> tuple[list[str], str | None]:
    """(check_manifest's reasons, manifest.json's own sha256; None when there is none to hash)."""
    f = root / MANIFEST
    if not f.is_file():
        return [
            f"the bundle has no {MANIFEST} (sha256 of every file, written by `gates run` when it "
            "finishes), so its files cannot be checked; bundles written before the manifest existed "
            "are refused: run the gates again"
        ], None
    if f.stat().st_size > MAX_FILE_BYTES:
        return [f"{MANIFEST} is not a bundle manifest ({MANIFEST} is over {MAX_FILE_BYTES >> 20} MiB)"], None
    raw = f.read_bytes()
    sha = hashlib.sha256(raw).hexdigest()
    try:
        man = loads_json(raw, what=MANIFEST, max_bytes=MAX_FILE_BYTES)
        files = man["files"]
        if man.get("manifest_format") != MANIFEST_FORMAT or not isinstance(files, dict):
            raise ValueError(f"manifest_format {man.get('manifest_format')!r}, expected {MANIFEST_FORMAT}")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        return [f"{MANIFEST} is not a bundle manifest ({e})"], sha
    return _file_reasons(root, files), sha


def _file_reasons(root: Path, files: dict) -> list[str]:
    out = []
    present = set(bundle_files(root))
    for rel, want in sorted(files.items()):
        p = root / rel
        if rel.startswith("/") or ".." in rel.split("/") or rel == MANIFEST:
            out.append(f"{MANIFEST} lists {rel!r}, which is not a path inside the bundle")
            continue
        if p.is_symlink() or not p.is_file():
            out.append(f"{rel} is listed in {MANIFEST} but {'is a link' if p.is_symlink() else 'missing'}")
            continue
        if not isinstance(want, dict) or p.stat().st_size != want.get("size") or sha256_file(p) != want.get("sha256"):
            out.append(f"{rel} differs from {MANIFEST} (edited after the run: size or sha256 changed)")
    for rel in sorted(present - set(files)):
        kind = "a link" if (root / rel).is_symlink() else "a file"
        hint = ""
        if re.fullmatch(r"(?:.*/)?\.[^/]+\.[0-9]+\.[A-Za-z0-9_]{6,}\.tmp", rel):
            hint = "; it is a writer's temporary: `cookbook gates compact BUNDLE` removes one left by a killed run"
        out.append(f"{rel} is {kind} in the bundle that {MANIFEST} does not list (added after the run){hint}")
    return out
