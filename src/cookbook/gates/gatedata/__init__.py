"""Gate data that ships with the cookbook: a prose haystack and spec-acceptance prompts.

Both are the project's own writing (Apache-2.0, see README.md here), so the embedded
default recipe's gates need nothing outside the clone. A recipe names them with the
`builtin:` names below (NeedlesGate.fillers, SpecAcceptanceGate.prompts); anything else is
read from the data path (GSM8K, moby-dick.txt).
"""

from __future__ import annotations

import hashlib
import re
from importlib import resources

PREFIX = "builtin:"
HAYSTACK = "builtin:cookbook-prose"  # every haystack/*.txt here, in name order
TASKS = "builtin:cookbook-tasks"  # prompts/cookbook-tasks.txt, one prompt a paragraph

_ROOT = resources.files(__name__)


def haystack_files() -> list:
    return sorted((f for f in _ROOT.joinpath("haystack").iterdir() if f.name.endswith(".txt")), key=lambda f: f.name)


def _paragraphs(text: str) -> list[str]:
    return [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def haystack_text(name: str = HAYSTACK) -> str:
    """The built-in prose as one text, paragraphs kept; each file's title line (no end punctuation) dropped."""
    if name != HAYSTACK:
        raise KeyError(name)
    paras = []
    for f in haystack_files():
        paras += [p for p in _paragraphs(f.read_text(encoding="utf-8")) if p[-1] in ".!?\"'"]
    return "\n\n".join(paras)


def tasks(name: str = TASKS) -> list[str]:
    """The built-in writing prompts, in file order."""
    if name != TASKS:
        raise KeyError(name)
    return _paragraphs(_ROOT.joinpath("prompts", "cookbook-tasks.txt").read_text(encoding="utf-8"))


def digest(name: str) -> str:
    """sha256 of a built-in set's text, recorded in the evidence so a bundle says which text it used."""
    text = haystack_text(name) if name == HAYSTACK else "\n\n".join(tasks(name))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
