"""The checkout's files a recipe serves or converts with, and their sha256: part of its content hash.

A recipe names such a file inside a value of `serve`, `convert` or `env` as `$COOKBOOK/<path>`
(`${COOKBOOK}/<path>`), or by the path an image copies the checkout to (IMAGE_CHECKOUTS):
chat templates, model configs, bucket files. Through `extends`, the merged recipe holds its
bases' values, so a base's files count too. Each file's sha256 goes into the recipe's content
hash (ResolvedRecipe.content_hash), so editing a chat template makes a verified recipe stale, as
editing recipe.yaml does, and a bundle records the digests it ran with (recipe.resolved.json).

Paths are untrusted: a path that climbs out of the checkout, a link that points out of it, a
variable inside the path, a file that is missing, not a regular file or larger than MAX_BYTES is
one diagnostic (R025) from `resolve` and `lint`, and stands in the hash as `unusable: <why>`.

Not here: the fix pack (pinned by the fix profile and checked against the engine by `cookbook
fixes --check`), the gate data built into the package (versioned with the gate code that reads
it), and files under the gate-data path (`$COOKBOOK_DATA`), which a checkout does not hold; a
golden from there is pinned by `gates.golden.golden_sha256`.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from cookbook.untrusted import inside, printable, read_regular

# Where ports/*/Dockerfile copy the checkout inside an image (tests/recipe/test_used_files.py reads them).
IMAGE_CHECKOUTS = ("/opt/cookbook", "/opt/gaudi-cookbook")
SECTIONS = ("serve", "convert", "env")  # the parts of a recipe that run; prose keys below are skipped
PROSE = frozenset({"why", "source", "help", "notes", "use_when"})
MAX_BYTES = 16 << 20  # a chat template, a config or a bucket file is far smaller
MAX_FILES = 64

_ROOTS = r"\$\{COOKBOOK\}|\$COOKBOOK(?![A-Za-z0-9_])|" + "|".join(re.escape(p) for p in IMAGE_CHECKOUTS)
# A path runs to the next character a shell would end it at (space, quote, ;, |, &, <, >, parentheses).
_REF = re.compile(rf"(?:{_ROOTS})/([^\s\"';|&<>()`]*)")

_CACHE: dict[tuple, str] = {}


def references(data: dict) -> list[tuple[str, str]]:
    """(dotted key, path relative to the checkout) for every file reference in the running parts."""
    out: list[tuple[str, str]] = []

    def walk(value, key: str) -> None:
        if isinstance(value, str):
            out.extend((key, m[1]) for m in _REF.finditer(value))
        elif isinstance(value, dict):
            for k, v in value.items():
                if k not in PROSE:
                    walk(v, f"{key}.{k}")
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{key}.{i}")

    for section in SECTIONS:
        walk(data.get(section), section)
    return out


def _digest(root: Path, rel: str) -> str:
    """sha256:<hex> of the file, or raises ValueError/OSError saying why it cannot be used."""
    if "$" in rel:
        raise ValueError("holds a shell variable, so the cookbook cannot tell which file to hash")
    full = inside(root, rel)
    st = os.stat(full)
    key = (str(full), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _CACHE:
        _CACHE[key] = "sha256:" + hashlib.sha256(read_regular(full, MAX_BYTES)).hexdigest()
    return _CACHE[key]


def used_files(data: dict, root: Path) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """({path: sha256:<hex> or 'unusable: <why>'}, [(key, path, why) for every unusable one])."""
    files: dict[str, str] = {}
    problems: list[tuple[str, str, str]] = []
    refs = references(data)
    if len(refs) > MAX_FILES:
        problems.append(("serve", "", f"names {len(refs)} files of the checkout; at most {MAX_FILES} are hashed"))
        refs = refs[:MAX_FILES]
    for key, rel in refs:
        if rel in files:
            continue
        try:
            files[rel] = _digest(root, rel)
        except FileNotFoundError:
            why = "is not in this checkout"
        except (ValueError, OSError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        else:
            continue
        files[rel] = f"unusable: {why}"
        problems.append((key, printable(rel[:200]), why))
    return dict(sorted(files.items())), problems
