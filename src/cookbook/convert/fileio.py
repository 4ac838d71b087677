"""File plumbing shared by the converters: atomic outputs and progress on stderr.

Kernel copies (copy_range) live in cookbook.filecopy, below gguf and convert both."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from pathlib import Path


class Progress:
    """Bytes done / total with rate and ETA on stderr: redrawn in place on a TTY, a line every 5 s otherwise."""

    def __init__(self, total: int, label: str, stream=None, enabled: bool = True):
        self.total, self.label, self.done = total, label, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()
        self.start = self.last = time.monotonic()

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and now - self.last >= (0.2 if self.tty else 5.0):
            self.last = now
            self._draw(now, end="\r" if self.tty else "\n")

    def _draw(self, now: float, end: str) -> None:
        dt = max(now - self.start, 1e-9)
        rate = self.done / dt
        eta = f"{(self.total - self.done) / rate:.0f}s" if rate > 0 else "?"
        pct = 100.0 * self.done / self.total if self.total else 100.0
        self.stream.write(f"{self.label}: {self.done / 1e6:,.1f}/{self.total / 1e6:,.1f} MB ({pct:.0f}%) "
                          f"{rate / 1e6:,.0f} MB/s ETA {eta}  {end}")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self._draw(time.monotonic(), end="\n")


def temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_file(path, *, overwrite: bool = False):
    """Yield a temporary path beside `path`; rename it to `path` only if the block succeeds."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(path)
    tmp = temp_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


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
