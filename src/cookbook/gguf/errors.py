"""The one error class for a bad GGUF file or a bad GGUF operation."""

from __future__ import annotations

from cookbook.untrusted import printable


class GGUFError(Exception):
    """A problem with a GGUF file: what, where (path, byte offset, field) and how to fix it."""

    def __init__(self, reason: str, *, path=None, offset: int | None = None, field: str | None = None,
                 help: str | None = None):
        self.reason = reason
        self.path = str(path) if path is not None else None
        self.offset = offset
        self.field = field
        self.help = help
        super().__init__(self.message())

    def message(self) -> str:
        where = []
        if self.path:
            where.append(self.path)
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        if self.field:
            where.append(self.field)
        # paths, keys and tensor names come from files: escaped, so no file writes to the terminal raw
        text = printable((": ".join(where) + ": " if where else "") + self.reason)
        if self.help:
            text += f"\n  help: {printable(self.help)}"
        return text
