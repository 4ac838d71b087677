"""A passed re-check remembered under .cache/evidence/, so `cookbook list`, lint and the docs do not
recompute every gate of every verified recipe each time.

The key is the manifest's sha256 (which pins every file's sha256), the recipe's content hash and
the source of the code that checks (the gate suite and this wing): a cached pass is valid only for
the bundle, the recipe and the code that made it. The caller still checks the files against the
manifest every time, so an edit to the bundle is seen at once, and hands in the manifest's sha256
it took from the bytes it checked (cookbook.evidence.manifest.checked_manifest): hashed once.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from cookbook.recipe import paths

_CHECKING_CODE = ("gates", "evidence")  # packages under cookbook/ whose source a pass depends on


def _code_fingerprint() -> str:
    """sha256 over the checking code's source."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for name in _CHECKING_CODE:
        for f in sorted((package / name).glob("*.py")):
            h.update(f"{name}/{f.name}".encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _memo(manifest_sha: str, resolved) -> Path:
    key = hashlib.sha256("\0".join([manifest_sha, resolved.content_hash, _code_fingerprint()]).encode()).hexdigest()
    return paths.repo_root() / ".cache" / "evidence" / f"{key}.passed"


def passed_before(manifest_sha: str, resolved) -> bool:
    """A full re-check of the bundle its manifest pins (manifest.json's sha256) passed for this recipe and code."""
    return _memo(manifest_sha, resolved).is_file()


def remember_pass(root: Path, manifest_sha: str, resolved) -> None:
    memo = _memo(manifest_sha, resolved)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(f"{root}\n", encoding="utf-8")
    except OSError:
        pass  # a read-only checkout just re-checks every time
