"""Copy a byte range file-to-file in the kernel (copy_file_range, pread/pwrite when it cannot).

Below both gguf (the writer streams tensor data) and convert (joins, splits, repacks), so
neither needs the other for it.
"""

from __future__ import annotations

import os

COPY_CHUNK = 64 << 20  # bytes per copy_file_range call (also the progress granularity)


def copy_range(src_fd: int, src_off: int, dst_fd: int, n: int, progress=None) -> None:
    """Copy n bytes from src_fd at src_off to dst_fd's current position, in the kernel when it can.
    `progress`, if given, has `advance(nbytes)` (e.g. cookbook.convert.fileio.Progress)."""
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
