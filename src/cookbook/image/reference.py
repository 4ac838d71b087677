"""Is this text an image reference Docker accepts? `--tag` and `--base` are checked here before they
reach a build line or the daemon.

The grammar is the one Docker's reference parser documents (github.com/distribution/reference,
reference.go), written out as one regular expression:

    reference   := name [ ":" tag ] [ "@" digest ]
    name        := [domain "/"] path-component ["/" path-component]*   (255 characters at most)
    domain      := host [":" port]; host := domain-component ["." domain-component]* or [IPv6]
    path-component := [a-z0-9]+ (separator [a-z0-9]+)*;  separator := [_.] | "__" | "-"+
    tag         := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest      := algorithm ":" hex   (algorithm [A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*, 32+ hex)

A `--base` may also be a placeholder the recipe's base.yaml explains (`<...>`); that is not checked here.
"""

from __future__ import annotations

import re

from cookbook.errors import CookbookError
from cookbook.untrusted import printable

_ALNUM = r"[a-z0-9]+"
_SEP = r"(?:[_.]|__|-+)"
_COMPONENT = rf"{_ALNUM}(?:{_SEP}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII)
NAME_MAX = 255


def problem(ref: str) -> str | None:
    """Why `ref` is not an image reference (None when it is one)."""
    if not isinstance(ref, str) or not ref:
        return "is empty"
    if len(ref) > 1024:
        return "is longer than 1,024 characters"
    m = REFERENCE.fullmatch(ref)
    if m is None:
        return "is not an image reference (NAME[:TAG][@DIGEST]: lowercase path components, a tag of letters, digits, `_.-`)"
    if len(m["name"]) > NAME_MAX:
        return f"has a name longer than {NAME_MAX} characters"
    return None


def check(ref: str | None, option: str) -> str | None:
    """`ref` unchanged if it is an image reference (or None); a refusal naming the option otherwise."""
    if ref is None:
        return None
    why = problem(ref)
    if why:
        raise CookbookError(
            f"{option} {printable(ref[:200])!s}: {why}",
            help=f"give {option} like cookbook/gemma3-270m-cpu:dev or registry.example:5000/team/image:1.0",
        )
    return ref
