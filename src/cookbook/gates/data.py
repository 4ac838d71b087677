"""Gate data: what ships with the cookbook, and GSM8K / haystack files read from a data path.

The built-in prose and prompts (`builtin:` names, cookbook.gates.gatedata) need nothing
outside the package. Everything else is read from the data path, whose default is
`default_data_dir()`: $COOKBOOK_DATA if set, else `.cache/data` in the checkout, where
`cookbook maint data fetch` writes GSM8K. Loaders fail with one message naming the missing file
and how to get it.
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path

from cookbook.gates.result import GateFailure

FETCH_HELP = (
    "`cookbook maint data fetch` downloads GSM8K into the data path; gates/README.md ('Gate data') says "
    "how to get the files by hand and where a haystack text goes"
)
DATA_ENV = "COOKBOOK_DATA"


def default_data_dir() -> Path:
    """The one default for the gate-data folder: $COOKBOOK_DATA if set, else <checkout>/.cache/data.

    Used by `cookbook gates run`, gates/run.sh (through it), `cookbook serve --gates` and
    `cookbook maint data fetch`.
    """
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    from cookbook.recipe.paths import repo_root

    return repo_root() / ".cache" / "data"


@dataclass(frozen=True)
class DataPaths:
    gsm8k_dir: Path | None = None
    haystack_dir: Path | None = None
    golden_dir: Path | None = None  # recorded goldens of the golden gate

    @classmethod
    def from_data_dir(cls, data_dir: Path | None, gsm8k: Path | None = None, haystack: Path | None = None):
        return cls(
            gsm8k_dir=gsm8k or (data_dir / "gsm8k" if data_dir else None),
            haystack_dir=haystack or (data_dir / "haystack" if data_dir else None),
            golden_dir=data_dir / "golden" if data_dir else None,
        )


def _need(path: Path | None, what: str, flag: str) -> Path:
    if path is None:
        raise GateFailure(f"no {what} path given: pass --data-dir DIR or {flag} PATH; {FETCH_HELP}")
    if not path.exists():
        raise GateFailure(f"{what} not found at {path}; {FETCH_HELP}")
    return path


def load_jsonl(path: Path, limit: int) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if len(rows) >= limit:
                break
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise GateFailure(f"{path}:{lineno}: not JSON ({e.msg}); {FETCH_HELP}") from e
            if not isinstance(row, dict) or "question" not in row or "answer" not in row:
                raise GateFailure(f"{path}:{lineno}: expected an object with 'question' and 'answer'")
            rows.append(row)
    return rows


def builtin_prompts(name: str, n: int) -> list[str]:
    from cookbook.gates import gatedata

    try:
        prompts = gatedata.tasks(name)
    except KeyError:
        raise GateFailure(f"unknown built-in prompt set {name!r}; built in: {gatedata.TASKS}") from None
    if len(prompts) < n:
        raise GateFailure(f"{name} holds {len(prompts)} prompts; the gate asks for {n}")
    return prompts[:n]


def gsm8k(paths: DataPaths, split: str, n: int) -> list[dict]:
    d = _need(paths.gsm8k_dir, "GSM8K", "--gsm8k")
    f = _need(d / f"{split}.jsonl", f"GSM8K {split}.jsonl", "--gsm8k")
    rows = load_jsonl(f, n)
    if len(rows) < n:
        raise GateFailure(f"{f} holds {len(rows)} problems; the gate asks for {n}")
    return rows


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z\"'(])")


def sentences(text: str) -> list[str]:
    """Split prose into sentences at ., ! or ? followed by space and a capital; whitespace collapsed."""
    text = re.sub(r"\s+", " ", text).strip()
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def strip_gutenberg(text: str) -> str:
    """The book between Project Gutenberg's '*** START OF' and '*** END OF' lines (the licence is not prose)."""
    start = re.search(r"^\*\*\* ?START OF[^\n]*$", text, re.MULTILINE)
    end = re.search(r"^\*\*\* ?END OF[^\n]*$", text, re.MULTILINE)
    return text[start.end() if start else 0 : end.start() if end else len(text)]


def haystack(paths: DataPaths, filler: str) -> list[str]:
    if filler.startswith("builtin:"):
        from cookbook.gates import gatedata

        try:
            return sentences(gatedata.haystack_text(filler))
        except KeyError:
            raise GateFailure(f"unknown built-in haystack {filler!r}; built in: {gatedata.HAYSTACK}") from None
    d = _need(paths.haystack_dir, "haystack", "--haystack")
    f = d / filler
    if not f.is_file():
        have = sorted(p.name for p in d.glob("*.txt")) if d.is_dir() else []
        raise GateFailure(f"haystack file {filler!r} not found in {d} (have: {have or 'none'}); {FETCH_HELP}")
    sents = sentences(strip_gutenberg(f.read_text(encoding="utf-8", errors="replace")))
    if len(sents) < 200:
        raise GateFailure(f"haystack {f} has only {len(sents)} sentences; use a longer natural text (a book)")
    return sents


PASSAGE_SENTENCES = 12  # sentences kept together when a long text is put together in passes


def long_sentences(sents: list[str], n: int, seed: int) -> list[str]:
    """At least `n` sentences of natural prose for a long prompt (16K to ~1M tokens): the text
    itself, then further passes over it, each pass its passages (runs of PASSAGE_SENTENCES
    sentences) in another seeded order. Passages recur across passes, but no word is ever
    repeated on its own: the Gaudi document warns that a prompt of one word repeated tens of
    thousands of times makes the model loop, and the SlimServe one that such prompts collapse
    speculative acceptance."""
    if len(sents) >= n or not sents:
        return list(sents)
    passages = [sents[i : i + PASSAGE_SENTENCES] for i in range(0, len(sents), PASSAGE_SENTENCES)]
    rng = random.Random(seed)
    out = list(sents)
    while len(out) < n:
        order = list(range(len(passages)))
        rng.shuffle(order)
        for k in order:
            out += passages[k]
    return out
