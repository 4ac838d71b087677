"""The serving environment a bundle records: an environment lock whose sha256 results.json holds,
or an image digest (and ID) of the form sha256:<64 hex>; and how the verified block names it."""

from __future__ import annotations

import re
from pathlib import Path

from cookbook.gates.bundle import sha256_file

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
HEX64 = re.compile(r"[0-9a-f]{64}")


def check_environment(root: Path, doc: dict) -> list[str]:
    env = doc.get("environment") or {}
    kind = env.get("kind")
    if kind == "image":
        digest = env.get("digest")
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            return [f"the image digest {digest!r} is not of the form sha256:<64 lowercase hex>"]
        image_id = env.get("id")
        if image_id is not None and (not isinstance(image_id, str) or not DIGEST.fullmatch(image_id)):
            return [f"the image ID {image_id!r} is not of the form sha256:<64 lowercase hex>"]
        return []
    if kind == "env-lock":
        want = env.get("sha256")
        if not isinstance(want, str) or not HEX64.fullmatch(want):
            return [f"results.json records the environment lock's sha256 as {want!r}, not 64 lowercase hex"]
        lock = root / "environment.lock"
        if lock.is_symlink() or not lock.is_file():
            return ["environment.lock is missing, though results.json records an environment lock"]
        got = sha256_file(lock)
        if got != want:
            return [f"environment.lock has sha256 {got}, results.json records {want} (the lock was edited)"]
        return []
    return []  # no environment at all: cookbook.evidence.claims says so


def environment_of(doc: dict) -> str | None:
    """The `environment:` string the verified block records for this bundle."""
    env = doc.get("environment") or {}
    if env.get("kind") == "image":
        out = f"image {env.get('digest')}"
        if env.get("id") and env.get("id") != env.get("digest"):
            out += f" (id {env['id']})"
        return out
    if env.get("kind") == "env-lock":
        return f"env-lock sha256:{env.get('sha256')}"
    return None
