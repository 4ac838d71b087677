"""The model folder: the one writer of a folder that holds a checkpoint.

A recipe names its model folder in one variable, CHECKPOINT_DIR (`${CHECKPOINT_DIR:-<default>}`):
`cookbook fetch` downloads into it (or converts into it), and `launch`, `serve`, the image's
launch.sh and the page serve it. A user may point that variable at any folder, so the cookbook
writes only into a folder it created: one absent or empty (it is created and marked), or one that
holds the marker file MARKER. A folder with anything else in it is never emptied, replaced or
written into, `--force` or not; nor is a link, a folder of another user, or one whose marker is
not a regular file of this user. Every refusal names the folder and how to go on.

Every command that writes a model folder (fetch's download, the converters' output folders)
asks `claim()` or `replacing()` here first. Imports only files and errors (the bottom).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from cookbook.errors import BAD_INPUT, CookbookError
from cookbook.files import atomic_dir
from cookbook.untrusted import printable

MARKER = ".cookbook-model"
MARKER_TEXT = "This folder was created by the cookbook; it may replace what is in it.\n"
VARIABLE = "CHECKPOINT_DIR"  # the recipes' model-folder variable
MAX_MARKER_BYTES = 4096


class FolderRefused(CookbookError):
    """A folder the cookbook may not write (exit 2): the message names it, the help how to go on."""

    exit_code = BAD_INPUT


def _refuse(folder: Path, why: str, help: str | None = None) -> FolderRefused:
    return FolderRefused(
        f"model folder {printable(str(folder))} {why}; the cookbook writes only into a folder it created",
        help=help
        or f"point {VARIABLE} (or fetch's --local-dir) at a new or empty folder, which the cookbook creates and "
        f"marks ({MARKER}); a folder that already holds the served model needs no writing: `cookbook launch` "
        "serves it as it is",
    )


def _owned(st: os.stat_result) -> bool:
    return st.st_uid == os.getuid()


def _marker_ok(folder: Path) -> bool | str:
    """True: a marker of ours; False: none; a string: why the entry named MARKER is not one."""
    path = folder / MARKER
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        return f"holds {MARKER} as a link"
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device would hang or lie: never opened
        return f"holds {MARKER} that is not a regular file"
    if not _owned(st):
        return f"holds {MARKER} owned by another user (uid {st.st_uid})"
    if st.st_size > MAX_MARKER_BYTES:
        return f"holds {MARKER} larger than a marker ({st.st_size} bytes)"
    return True


def problem(folder) -> str | None:
    """Why the cookbook may not write into `folder` (None: it may). Writes nothing."""
    folder = Path(folder)
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if stat.S_ISLNK(st.st_mode):
        return f"is a link (to {printable(os.readlink(folder))})"
    if not stat.S_ISDIR(st.st_mode):
        return "exists and is not a folder"
    if not _owned(st):
        return f"is owned by another user (uid {st.st_uid})"
    marked = _marker_ok(folder)
    if isinstance(marked, str):
        return marked
    if marked:
        return None
    try:
        with os.scandir(folder) as it:
            entries = [e.name for e in it]
    except OSError as e:
        return f"cannot be listed ({e.strerror or e})"
    if entries:
        shown = ", ".join(printable(e) for e in sorted(entries)[:3]) + (", ..." if len(entries) > 3 else "")
        return f"holds {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} the cookbook did not write ({shown}) and no {MARKER} marker"
    return None


def check(folder) -> None:
    """Refuse (FolderRefused) a folder the cookbook may not write; writes nothing."""
    if (why := problem(folder)) is not None:
        raise _refuse(Path(folder), why)


def _write_marker(folder: Path) -> None:
    fd = os.open(folder / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(MARKER_TEXT)


def claim(folder) -> Path:
    """Make `folder` the cookbook's to write into: created with its marker when absent, marked when
    empty, accepted when marked; anything else refused before a byte is written."""
    folder = Path(folder)
    check(folder)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            folder.mkdir()
        check(folder)  # again: it may have changed between the look and the mkdir
        if _marker_ok(folder) is False:
            _write_marker(folder)
    except FileExistsError:
        raise _refuse(folder, f"gained a {MARKER} meanwhile that the cookbook did not write") from None
    except OSError as e:
        raise FolderRefused(
            f"cannot create the model folder {printable(str(folder))}: {e.strerror or e}",
            help=f"point {VARIABLE} (or --local-dir) at a folder you can write",
        ) from None
    return folder


@contextlib.contextmanager
def replacing(out_dir, *, force: bool = False):
    """A converter's output folder, written whole: yields a new temporary folder beside `out_dir` that
    becomes `out_dir` at the end (cookbook.files.atomic_dir), marked as the cookbook's. An existing
    `out_dir` must be empty or marked; a marked one with files is replaced only with `force`."""
    out_dir = Path(out_dir)
    check(out_dir)
    marked = out_dir.is_dir() and _marker_ok(out_dir) is True
    full = marked and any(e.name != MARKER for e in os.scandir(out_dir))
    if full and not force:
        raise FileExistsError(out_dir)
    if marked and not full:
        os.unlink(out_dir / MARKER)  # an emptied folder of ours: atomic_dir renames onto it
    with atomic_dir(out_dir, force=full) as tmp:
        yield tmp
        check(out_dir)  # nothing of a user's may have appeared in it while the conversion ran
        (tmp / MARKER).unlink(missing_ok=True)  # a converter that copied a source's marker: ours is written
        _write_marker(tmp)
