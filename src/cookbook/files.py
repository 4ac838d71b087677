"""The checkout root, atomic file writes and in-kernel byte copies: one of each, for every layer.

Nothing ever leaves a half-written output: every writer fills a temporary file beside its
target and renames it over the target only when the content is complete; on any failure
the temporary file is removed and the target is untouched. Temporary names are unique and
made here (mkstemp, mkdtemp), so a tool never removes or replaces a file it did not create,
and errors name the target, not the temporary file. A temporary's name holds its writer's
PID, so the next write of the same target removes what a killed writer left (and says so).
Imports only the standard library.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
import tempfile
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


WRITE_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS}


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _prefix(path: Path) -> str:
    """Hidden temporaries beside `path` are named `.NAME.PID.XXXXXXXX.tmp` (or `.old`): the PID of the
    writer tells a later run whether the writer is still alive."""
    return f".{path.name}.{os.getpid()}."


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive, and not ours to judge
    return True


def clean_leftovers(path) -> list[Path]:
    """Remove the hidden temporaries that a killed writer of `path` left beside it (kill -9 skips
    every cleanup): `.NAME.PID.XXXXXXXX.tmp` files and folders and `.NAME.PID.XXXXXXXX.old` folders
    of this user whose process PID is gone. Says so on stderr; returns what it removed."""
    path = Path(path)
    pattern = re.compile(re.escape(f".{path.name}.") + r"([0-9]+)\.[A-Za-z0-9_]{6,}\.(?:tmp|old)")
    removed = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if not m or _alive(int(m[1])):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
        sys.stderr.write(f"note: removed {entry.path}, left by an interrupted run (process {m[1]} is gone)\n")
    return removed


def _temp_beside(path: Path, suffix: str = ".tmp") -> Path:
    """A new empty file beside `path` with a unique name (mkstemp: O_EXCL, never an existing file),
    with the mode a plain open() would give (mkstemp's 0600 would carry over to the output).
    A killed earlier writer's leftovers beside it are removed first (clean_leftovers)."""
    clean_leftovers(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=_prefix(path), suffix=suffix)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
        os.close(fd)
    return Path(name)


def _named(e: OSError, final: Path, temps=()) -> OSError:
    """An OSError from writing `final` (under a temporary name), naming `final` rather than the temp file."""
    if e.filename is not None and str(e.filename) not in {str(t) for t in temps}:
        return e  # about an input: its name is right as it is
    what = "could not write" if e.errno in WRITE_ERRNOS else "failed while writing"
    return OSError(e.errno, f"{what} ({e.strerror or e})", str(final))


@contextlib.contextmanager
def atomic_file(path, *, overwrite: bool = False):
    """Yield a new temporary path beside `path`; rename it to `path` only if the block succeeds.

    The temporary name is unique and created here, so nothing but it is ever removed; errors
    while writing name `path`, not the temporary file."""
    path = Path(path)
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise FileExistsError(path)
    tmp = _temp_beside(path)
    try:
        try:
            yield tmp
        except OSError as e:
            raise _named(e, path, [tmp]) from None
        if not overwrite and (path.exists() or path.is_symlink()):
            raise FileExistsError(path)  # appeared meanwhile: not ours to replace
        if path.is_file():
            shutil.copymode(path, tmp)  # a replaced file keeps its permission bits
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def atomic_dir(path, *, force: bool = False):
    """Yield a new temporary folder beside `path` to fill; at the end it becomes `path`.

    `path` must be absent or an empty folder unless force. The temporary folder (and, with
    force, the one holding the replaced `path` until the swap is done) are unique names made
    here: a user's `path.tmp` or `path.old` is never touched."""
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())) and not force:
        raise FileExistsError(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(path)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=_prefix(path), suffix=".tmp"))
    os.chmod(tmp, 0o777 & ~_umask())  # the mode of a plain mkdir, not mkdtemp's 0700
    try:
        try:
            yield tmp
        except OSError as e:
            raise _named(e, path, [tmp]) from None
        if not (path.exists() or path.is_symlink()):
            os.rename(tmp, path)
        elif not force:
            os.rename(tmp, path)  # onto an empty folder; fails (ENOTEMPTY) if it was filled meanwhile
        else:
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=_prefix(path), suffix=".old"))
            os.rename(path, old / "previous")
            try:
                os.rename(tmp, path)
            except BaseException:
                os.rename(old / "previous", path)
                old.rmdir()
                raise
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


class AtomicSet:
    """Several output files that appear together: each is written under a unique temporary name
    beside it, and all are renamed to their final names only once every one is complete.

    An interrupted or failed run leaves no file under a final name (kill -9 can leave hidden
    `.NAME.PID.*.tmp` files, which the next write of NAME removes; never a partial set). If a final rename fails, the files already
    renamed are removed again when they replaced nothing, and the error says what is left.
    """

    def __init__(self, finals, *, overwrite: bool = False, inputs=(), what: str = "file"):
        self.finals = [Path(p) for p in finals]
        self.overwrite, self.what = overwrite, what
        for f in self.finals:
            for i in inputs:
                if same_file(f, i) or Path(f).absolute() == Path(i).absolute():
                    raise OSError(
                        errno.EINVAL,
                        f"is also the input; refused (the {what} would be "
                        "overwritten while it is read): choose another output name",
                        str(f),
                    )
        if not overwrite:
            for f in self.finals:
                if f.exists() or f.is_symlink():
                    raise FileExistsError(f)
        self.temps: dict[Path, Path] = {}
        self.current: Path | None = None

    def temp(self, final) -> Path:
        final = Path(final)
        self.current = final
        self.temps[final] = t = _temp_beside(final)
        return t

    def _remove_temps(self) -> None:
        for t in self.temps.values():
            with contextlib.suppress(FileNotFoundError):
                t.unlink()

    def commit(self) -> None:
        if not self.overwrite:
            for f in self.finals:
                if f.exists() or f.is_symlink():
                    self._remove_temps()
                    raise FileExistsError(f)  # appeared meanwhile: not ours to replace
        done: list[Path] = []
        try:
            for f in self.finals:
                os.replace(self.temps[f], f)
                done.append(f)
        except BaseException as e:
            failed = self.finals[len(done)]
            kept = []
            for f in done:
                if self.overwrite:
                    kept.append(f)  # it replaced a file of the same name: nothing to restore
                else:
                    with contextlib.suppress(OSError):
                        f.unlink()
            for f in self.finals[len(done) :]:
                with contextlib.suppress(FileNotFoundError):
                    self.temps[f].unlink()
            left = (
                f"{len(kept)} of {len(self.finals)} {self.what}s were already renamed into place "
                f"(replacing files of the same name): {', '.join(str(k) for k in kept)}; the others were "
                "removed"
                if kept
                else f"no {self.what} was left under its final name"
            )
            reason = getattr(e, "strerror", None) or type(e).__name__
            raise OSError(
                getattr(e, "errno", None) or errno.EIO,
                f"could not rename the finished {self.what} into place ({reason}); {left}",
                str(failed),
            ) from None


@contextlib.contextmanager
def atomic_set(finals, *, overwrite: bool = False, inputs=(), what: str = "file"):
    """`with atomic_set([a, b]) as s: write s.temp(a), s.temp(b)` -> a and b appear together, or neither."""
    s = AtomicSet(finals, overwrite=overwrite, inputs=inputs, what=what)
    try:
        try:
            yield s
        except OSError as e:
            raise _named(e, s.current or s.finals[0], s.temps.values()) from None
    except BaseException:
        s._remove_temps()
        raise
    s.commit()


def atomic_write(path, data: str | bytes, *, encoding: str = "utf-8") -> None:
    """Write `data` (text or bytes) to `path` atomically, creating its parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, overwrite=True) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding=encoding)


# Copy a byte range file-to-file in the kernel (copy_file_range; pread/pwrite where it cannot):
# the GGUF writer streams tensor data with it and the converters join, split and repack with it.
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


def out_dir_problem(path) -> str | None:
    """Why `path` cannot be a command's output folder (None when it can): an existing one must be a
    real folder (not a link, a file or /proc/self) that this user can write; an absent one needs a
    writable folder above it. Asked before a long run, so the run does not end on a traceback."""
    path = Path(path)
    if path.is_symlink():
        return "is a link; name a real folder"
    if path.exists():
        if not path.is_dir():
            return "exists and is not a folder"
        return None if os.access(path, os.W_OK | os.X_OK) else "is a folder you cannot write"
    above = next((p for p in path.absolute().parents if p.exists()), None)
    if above is None or not above.is_dir() or not os.access(above, os.W_OK | os.X_OK):
        return f"cannot be created ({above} is not a folder you can write)"
    return None
