"""Shell words from recipe text: what the launch block may leave unquoted, and nothing else.

A recipe value is data. When it is rendered into bash, every character is quoted except
variable references of three plain forms, which a user expects to expand when the block is
pasted: `$NAME`, `${NAME}` and `${NAME:-default}` (the default itself made only of such
references and characters that need no quoting). Anything else a `$` starts (`$(…)`,
`${X@P}`, `${!X}`, `$1`, `$$`, arithmetic) is quoted, so bash passes it on as text.
Control characters (newlines, escape sequences, bidi overrides) cannot be shown honestly
in a copy-paste block and are refused instead of quoted.

`expand()` gives, for the same lexing, what bash makes of a quoted word in an argv slot
(without word splitting), so `cookbook serve` can run convert steps as argument lists
with the values the launch block's exports produce.
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Mapping

NAME_RE = r"[A-Za-z_][A-Za-z0-9_]*"
# Characters shlex.quote leaves bare (ASCII word characters and @%+=:,./-).
_SAFE = frozenset(string.ascii_letters + string.digits + "_@%+=:,./-")
# C0, DEL and C1 controls, line/paragraph separators and bidi embedding/override/isolate marks.
CONTROL_CLASS = r"\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069"
NO_CONTROL = rf"^[^{CONTROL_CLASS}]*$"
_CONTROL = re.compile(rf"[{CONTROL_CLASS}]")
_NAME = re.compile(NAME_RE)
CONTROL_HELP = "write the value on one line, without control characters (fold long text with YAML's `>-`)"


class UnsafeText(ValueError):
    """The text holds a character that cannot be rendered into a shell block."""


class UnsetVariable(KeyError):
    """expand() met a reference to a variable that is not set (bash's `set -u`)."""


def control_char(text: str) -> str | None:
    """The first control character of `text`, as an escape (e.g. '\\n'), or None."""
    m = _CONTROL.search(text)
    return None if m is None else repr(m.group(0))[1:-1]


def _ref_end(text: str, i: int) -> int | None:
    """End of the plain variable reference starting at text[i] == '$', or None."""
    if text.startswith("${", i):
        m = _NAME.match(text, i + 2)
        if m is None:
            return None
        j = m.end()
        if text.startswith("}", j):
            return j + 1
        if not text.startswith(":-", j):
            return None
        j += 2
        while j < len(text):
            c = text[j]
            if c == "}":
                return j + 1
            if c == "$":
                end = _ref_end(text, j)
                if end is None:
                    return None
                j = end
            elif c in _SAFE:
                j += 1
            else:
                return None
        return None
    m = _NAME.match(text, i + 1)
    return None if m is None else m.end()


def segments(text: str) -> list[tuple[bool, str]]:
    """(is_reference, text) runs; literal runs may hold a `$` that starts no plain reference."""
    out: list[tuple[bool, str]] = []
    lit: list[str] = []
    i = 0
    while i < len(text):
        end = _ref_end(text, i) if text[i] == "$" else None
        if end is None:
            lit.append(text[i])
            i += 1
            continue
        if lit:
            out.append((False, "".join(lit)))
            lit = []
        out.append((True, text[i:end]))
        i = end
    if lit:
        out.append((False, "".join(lit)))
    return out


def check(text: str) -> None:
    ch = control_char(text)
    if ch is not None:
        raise UnsafeText(f"holds the control character '{ch}'")


def quote(text: str) -> str:
    """`text` as one bash word: plain references bare, every other run shell-quoted (a run
    of characters that need no quoting stays bare, as with shlex.quote)."""
    check(text)
    if text == "":
        return "''"
    return "".join(seg if ref else shlex.quote(seg) for ref, seg in segments(text))


def quote_arg(text: str) -> str:
    """`text` as one command argument: like quote(), but each reference in double quotes, so
    an empty or unset variable stays one (empty) argument instead of vanishing and shifting
    the flags after it, and a value with spaces is not split or globbed."""
    check(text)
    if text == "":
        return "''"
    return "".join(f'"{seg}"' if ref else shlex.quote(seg) for ref, seg in segments(text))


def is_bare(text: str) -> bool:
    """True when quote(text) == text: only plain references and unquoted-safe characters."""
    return (
        bool(text)
        and control_char(text) is None
        and all(ref or all(c in _SAFE for c in seg) for ref, seg in segments(text))
    )


def quote_word(text: str) -> str:
    """Like quote(), but a word already written as "…" around a bare-safe body is kept
    as written (`"$COOKBOOK/fixes/apply_all.py"`)."""
    check(text)
    if len(text) >= 2 and text[0] == text[-1] == '"' and is_bare(text[1:-1]):
        return text
    return quote(text)


def expand(text: str, env: Mapping[str, str]) -> str:
    """What bash makes of quote(text) (no word splitting): references from `env`,
    `${X:-d}` taking d when X is unset or empty; UnsetVariable for any other unset name."""
    out = []
    for ref, seg in segments(text):
        out.append(_expand_ref(seg, env) if ref else seg)
    return "".join(out)


def _expand_ref(ref: str, env: Mapping[str, str]) -> str:
    if ref.startswith("${"):
        body = ref[2:-1]
        name, sep, default = body.partition(":-")
        if sep:
            value = env.get(name)
            return value if value else expand(default, env)
    else:
        name = ref[1:]
    if name not in env:
        raise UnsetVariable(name)
    return env[name]
