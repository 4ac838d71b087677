"""The one user-facing error type, and the exit-code convention of every `cookbook` command.

Any layer may raise CookbookError (or a domain error derived from it: RecipeError,
GGUFError, BucketError, FixError, ServeError, ...); click catches it wherever a command
runs and prints, on stderr and without a traceback:

    error: <message>
      help: <help>          (only when there is one)

Exit codes:
    0    success
    1    FAILED: the command ran and what it checked failed (lint errors, a stale generated
         file, a gate, a fix that does not apply or has drifted, a server that did not start)
    2    BAD_INPUT: the request was refused before anything ran (unknown recipe or quant, a
         refused configuration, a missing or malformed file or flag); click's usage errors
         exit 2 too
    130  INTERRUPTED: Ctrl-C

This module imports only click, so the lowest modules (gguf, buckets, recipe) may import it.
"""

from __future__ import annotations

import click

FAILED = 1
BAD_INPUT = 2
INTERRUPTED = 130


class CookbookError(click.ClickException):
    """What went wrong (message), how to fix it (help), and the exit code (default BAD_INPUT)."""

    exit_code = BAD_INPUT

    def __init__(self, message: str, help: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.help = help
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:  # the message and its help line, without the `error: ` prefix
        return self.format_message() + (f"\n  help: {self.help}" if self.help else "")

    def render(self) -> str:
        """The text printed for this error: `error: ...` and, when given, `  help: ...`."""
        text = f"error: {self.format_message()}"
        return text + (f"\n  help: {self.help}" if self.help else "")

    def show(self, file=None) -> None:
        click.echo(self.render(), file=file, err=file is None)
