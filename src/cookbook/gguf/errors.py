"""The one error class for a bad GGUF file or a bad GGUF operation."""

from __future__ import annotations

from cookbook.errors import CookbookError


class GGUFError(CookbookError):
    """A problem with a GGUF file: what, where (path, byte offset, field) and how to fix it."""

    def __init__(self, reason: str, *, path=None, offset: int | None = None, field: str | None = None,
                 help: str | None = None):
        self.reason = reason
        self.path = str(path) if path is not None else None
        self.offset = offset
        self.field = field
        super().__init__(self.where() + reason, help=help)

    def where(self) -> str:
        where = []
        if self.path:
            where.append(self.path)
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        if self.field:
            where.append(self.field)
        return ": ".join(where) + ": " if where else ""
