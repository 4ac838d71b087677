"""File plumbing shared by the converters: kernel copies, progress on stderr (atomic outputs: cookbook.files)."""

from __future__ import annotations

import os
import sys
import time

COPY_CHUNK = 64 << 20  # bytes per copy_file_range call (also the progress granularity)


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


def copy_range(src_fd: int, src_off: int, dst_fd: int, n: int, progress: Progress | None = None) -> None:
    """Copy n bytes from src_fd at src_off to dst_fd's current position, in the kernel when it can."""
    dst_off = os.lseek(dst_fd, 0, os.SEEK_CUR)
    left = n
    use_cfr = hasattr(os, "copy_file_range")
    while left:
        step = min(left, COPY_CHUNK)
        done = 0
        if use_cfr:
            try:
                done = os.copy_file_range(src_fd, dst_fd, step, src_off, dst_off)
            except OSError:
                use_cfr = False  # e.g. across filesystems on old kernels: fall back below
        if not use_cfr:
            data = os.pread(src_fd, step, src_off)
            done = os.pwrite(dst_fd, data, dst_off) if data else 0
        if done <= 0:
            raise OSError(f"source ended {left} bytes early at offset {src_off}")
        src_off += done
        dst_off += done
        left -= done
        if progress:
            progress.advance(done)
    os.lseek(dst_fd, dst_off, os.SEEK_SET)
