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

With --json, a command that fails also prints one JSON object on stdout (`error_document`):
what went wrong, where, the help line and the exit code. cookbook.cli prints it for every
command that has --json, so no command writes its own.

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

    def __init__(
        self,
        message: str,
        help: str | None = None,
        exit_code: int | None = None,
        location: str | None = None,
        details: dict | None = None,
    ):
        super().__init__(message)
        self.help = help
        self._location = location
        self._details = details or {}
        if exit_code is not None:
            self.exit_code = exit_code

    def location(self) -> str | None:
        """Where the problem is (a file, a file:line, a flag), when the raiser knows; else None."""
        return self._location

    def summary(self) -> str:
        """The message as the JSON error object's `what` (a subclass with several parts joins them)."""
        return self.format_message()

    def details(self) -> dict:
        """Fields of the JSON error object beyond what, where, help and exit_code (a subclass's own)."""
        return dict(self._details)

    def __str__(self) -> str:  # the message and its help line, without the `error: ` prefix
        return self.format_message() + (f"\n  help: {self.help}" if self.help else "")

    def render(self) -> str:
        """The text printed for this error: `error: ...` and, when given, `  help: ...`."""
        text = f"error: {self.format_message()}"
        return text + (f"\n  help: {self.help}" if self.help else "")

    def show(self, file=None) -> None:
        click.echo(self.render(), file=file, err=file is None)


def error_document(exc: click.ClickException, command: str) -> dict:
    """The JSON error object a --json command prints on stdout when it fails: `what` (the message),
    `where` (the file, flag or key at fault; else the command), `help` (the help line, or the
    usage hint), `exit_code`, `command`, and whatever the error adds (a recipe's diagnostics)."""
    where = None
    help = None
    if isinstance(exc, CookbookError):
        where, help, what = exc.location(), exc.help, exc.summary()
        diagnostics = getattr(exc, "diagnostics", None)
        if help is None and diagnostics:
            help = diagnostics[0].help
    else:  # click's own: a usage error, a bad parameter
        what = exc.format_message()
        param = getattr(exc, "param", None)
        if param is not None:
            where = " / ".join(getattr(param, "opts", None) or [param.name or ""])
        ctx = getattr(exc, "ctx", None)
        help = f"`{ctx.command_path} --help` lists the arguments and options" if ctx else None
    doc = {"what": what, "where": where or command, "help": help, "exit_code": exc.exit_code, "command": command}
    if isinstance(exc, CookbookError):
        doc.update(exc.details())
    return {"error": doc}
