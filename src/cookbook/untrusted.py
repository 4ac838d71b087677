"""Input from strangers: text that is safe to print, inputs opened only when they are regular files.

Imports nothing of the cookbook, so every layer (cookbook.gguf, cookbook.convert, the CLI) can use it.

- `printable(text)`: untrusted text (GGUF keys, values, tensor names, file names from an index)
  with every control, format, separator, private-use or unassigned character written as an
  escape (`\\x1b`, `\\u202e`); bytes that were not UTF-8 (kept by `surrogateescape`) come back
  as `\\xNN`. Every printer and every error message of the converters goes through it, so a
  file cannot move the cursor, retitle the terminal, or hide text behind a bidi override.
- `open_regular(path)`: open an input only if it is a regular file (FIFOs, devices, sockets
  and directories are refused before anything blocks or reads forever).
- `inside(root, rel)`: a path a file names, resolved, only if it stays inside `root`.
- `http_url_problem(url)`: why a server base URL given by a user cannot be used.
- `loads_json(text)`: the one bounded reader of untrusted JSON (size, depth, digits; one ValueError).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def _escape(c: str) -> str:
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{o - 0xDC00:02x}"
    if o < 0x100:
        return f"\\x{o:02x}"
    if o < 0x10000:
        return f"\\u{o:04x}"
    return f"\\U{o:08x}"


def printable(text) -> str:
    """`text` with every non-printable character escaped (space stays; tab and newline are escaped)."""
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else _escape(c) for c in s)


def printable_lines(text) -> str:
    """Like printable, but the line breaks of a multi-line message (reason + help) are kept."""
    return "\n".join(printable(line) for line in str(text).split("\n"))


_KINDS = (
    (stat.S_ISDIR, "directory"),
    (stat.S_ISFIFO, "FIFO (named pipe)"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)


def file_kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "regular file" if stat.S_ISREG(mode) else "special file"


class NotRegularFile(OSError):
    """An input that is a FIFO, a device, a socket or a directory (an OSError, so CLIs name the path)."""

    def __init__(self, path, kind: str):
        super().__init__(
            errno.EINVAL,
            f"is a {kind}, not a regular file (inputs must be regular files: "
            "FIFOs, devices, sockets and directories are refused)",
            str(path),
        )
        self.kind = kind


def check_regular(path) -> os.stat_result:
    """stat(path) (following links); NotRegularFile unless it is a regular file."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(path, file_kind(st.st_mode))
    return st


def open_regular(path, flags: int = os.O_RDONLY) -> int:
    """os.open(path, flags) only if path is a regular file, checked before and after opening.

    The open is non-blocking (a FIFO swapped in between the checks cannot hang it); the
    returned descriptor is blocking again.
    """
    check_regular(path)
    fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, file_kind(st.st_mode))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path, limit: int) -> bytes:
    """The bytes of a small regular file (a sums file, an index, a config): refused above `limit`."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise OSError(
                errno.EFBIG, f"is {size:,} bytes, more than the {limit:,} allowed for this kind of file", str(path)
            )
        chunks, left = [], limit + 1
        while left > 0 and (b := os.read(fd, min(left, 1 << 20))):
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) > limit:
            raise OSError(errno.EFBIG, f"grew past the {limit:,} bytes allowed while being read", str(path))
        return data
    finally:
        os.close(fd)


def is_plain_name(name) -> bool:
    """True for a plain file name: a non-empty str without path separators, NUL, or '.'/'..'."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
    )


NAME_MAX = 255  # bytes of one path component on Linux filesystems
PATH_MAX = 1024  # characters of a repository-relative path the cookbook accepts from a file


def inside(root, rel) -> Path:
    """`root/rel`, resolved (links followed), only if it stays inside `root`; ValueError saying why not.

    For paths a recipe names (image.dockerfile, image.port): an absolute path, `..` climbing out,
    a link pointing out, a NUL or an over-long name is refused before anything is opened."""
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise ValueError("is empty or holds a NUL character")
    if len(rel) > PATH_MAX or any(len(part.encode("utf-8", "surrogateescape")) > NAME_MAX for part in rel.split("/")):
        raise ValueError(f"is too long (at most {PATH_MAX} characters, {NAME_MAX} bytes a name)")
    if os.path.isabs(rel):
        raise ValueError("is an absolute path; name it relative to the checkout")
    base = Path(root).resolve()
    try:
        full = (base / rel).resolve()
    except (OSError, RuntimeError) as e:  # RuntimeError: a link loop
        raise ValueError(f"cannot be resolved ({getattr(e, 'strerror', None) or e})") from None
    if not full.is_relative_to(base):
        raise ValueError(f"leaves {base} (it resolves to {full})")
    return full


def http_url_problem(url) -> str | None:
    """Why `url` cannot be a server's base URL (None when it is an http(s) URL with a host and a valid
    port, no spaces or control characters); checked before any request is made."""
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not url:
        return "is empty"
    if len(url) > 2048:
        return "is longer than 2,048 characters"
    if not url.isprintable() or any(c.isspace() for c in url):
        return "holds spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as e:
        return f"is not a URL ({e})"
    if parts.scheme not in ("http", "https"):
        return "does not start with http:// or https://"
    if not parts.hostname:
        return "names no host"
    return None


JSON_MAX_DEPTH = 64  # nesting of objects and arrays; no file or answer the cookbook reads comes near it


def loads_json(text, *, what: str = "the JSON", max_bytes: int = 64 << 20, max_depth: int = JSON_MAX_DEPTH):
    """The one reader of untrusted JSON (bundle files, server answers, saved measurements, JSON given
    as a setting): the value, or ValueError in one line for text that is too large, not UTF-8, not
    JSON, nested deeper than `max_depth` (checked after parsing without recursion, so no reader
    after it recurses to death), or holding an integer past Python's digit limit."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > max_bytes:
            raise ValueError(f"{what} is {len(text):,} bytes, more than the {max_bytes:,} allowed")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{what} is not UTF-8 ({e.reason} at byte {e.start})") from None
    elif len(text) > max_bytes:
        raise ValueError(f"{what} is {len(text):,} characters, more than the {max_bytes:,} allowed")
    import json

    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"{what} nests more than {max_depth} levels deep") from None
    except ValueError as e:  # JSONDecodeError, and the integer-string limit (a 5,000-digit number)
        raise ValueError(f"{what} is not JSON a reader can take ({str(e).splitlines()[0][:200]})") from None
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > max_depth:
                raise ValueError(f"{what} nests more than {max_depth} levels deep")
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return value
