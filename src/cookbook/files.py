"""The checkout root and atomic file writes: one of each, for every layer.

Nothing ever leaves a half-written output: every writer fills a temporary file beside its
target and renames it over the target only when the content is complete; on any failure
the temporary file is removed and the target is untouched. Imports only the standard library.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path


def repo_root() -> Path:
    """The checkout root: $COOKBOOK_ROOT, else the nearest parent holding recipes/ and pyproject.toml."""
    env = os.environ.get("COOKBOOK_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "recipes").is_dir() and (parent / "pyproject.toml").is_file():
            return parent
    return Path.cwd()


def temp_name(path: Path) -> Path:
    """The temporary name beside `path` that its atomic writers fill (hidden, per process)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_file(path, *, overwrite: bool = False):
    """Yield a temporary path beside `path`; rename it to `path` only if the block succeeds.

    An existing `path` is refused (FileExistsError) unless overwrite; when replaced, its
    permission bits carry over to the new file.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(path)
    tmp = temp_name(path)
    try:
        yield tmp
        if path.exists():
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def atomic_write(path, data: str | bytes, *, encoding: str = "utf-8") -> None:
    """Write `data` (text or bytes) to `path` atomically, creating its parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, overwrite=True) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding=encoding)


@contextlib.contextmanager
def atomic_dir(path, *, force: bool = False):
    """Yield `<path>.tmp` to fill; at the end it replaces `path` (which must be absent or empty unless force)."""
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())) and not force:
        raise FileExistsError(path)
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        if path.exists():
            old = path.with_name(path.name + ".old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
