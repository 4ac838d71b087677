"""The one error class for a bad GGUF file or a bad GGUF operation."""

from __future__ import annotations

from cookbook.errors import CookbookError
from cookbook.untrusted import printable


class GGUFError(CookbookError):
    """A problem with a GGUF file: what, where (path, byte offset, field) and how to fix it."""

    def __init__(
        self, reason: str, *, path=None, offset: int | None = None, field: str | None = None, help: str | None = None
    ):
        self.reason = reason
        self.path = str(path) if path is not None else None
        self.offset = offset
        self.field = field
        # paths, keys and tensor names come from files: escaped, so no file writes to the terminal raw
        super().__init__(printable(self.where() + reason), help=printable(help) if help else None)

    def where(self) -> str:
        where = []
        if self.path:
            where.append(self.path)
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        if self.field:
            where.append(self.field)
        return ": ".join(where) + ": " if where else ""

    def location(self) -> str | None:
        return printable(self.where().removesuffix(": ")) or None

    def summary(self) -> str:
        return printable(self.reason)
