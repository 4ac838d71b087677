"""File plumbing shared by the converters: progress on stderr.

Atomic outputs live in cookbook.files and so do kernel copies (copy_range),
below gguf and convert both."""

from __future__ import annotations

import sys
import time


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
        self.stream.write(
            f"{self.label}: {self.done / 1e6:,.1f}/{self.total / 1e6:,.1f} MB ({pct:.0f}%) "
            f"{rate / 1e6:,.0f} MB/s ETA {eta}  {end}"
        )
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self._draw(time.monotonic(), end="\n")
