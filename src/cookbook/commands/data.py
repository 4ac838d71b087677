"""`cookbook maint data fetch | path`: the gate data that does not ship with the cookbook.

The embedded default recipe's gates use only the built-in data (cookbook.gates.gatedata).
GPU recipes also read GSM8K, which `fetch` downloads from the Hugging Face Hub into the
data folder (cookbook.gates.data.default_data_dir: $COOKBOOK_DATA, else .cache/data).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import click

from cookbook.errors import BAD_INPUT, FAILED, CookbookError
from cookbook.untrusted import file_kind, printable

REPO_ID = "openai/gsm8k"
CONFIG = "main"
SPLITS = ("test", "train")
# The Hub's parquet files of openai/gsm8k, config main (one shard per split).
FILES = {split: f"{CONFIG}/{split}-00000-of-00001.parquet" for split in SPLITS}
DEFAULT_ENDPOINT = "https://huggingface.co"

MIT_LICENSE = """\
MIT License

Copyright (c) 2021 OpenAI

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""

BY_HAND = """\
to get the files by hand, either
    - run `cookbook maint data fetch --data-dir DIR` on a machine that reaches the Hub and copy DIR/gsm8k/ to {target}/, or
    - put test.jsonl and train.jsonl from https://github.com/openai/grade-school-math (grade_school_math/data/)
      and its LICENSE into {target}/ (gates/README.md, 'Gate data', has the curl lines), or
    - set COOKBOOK_DATA to a folder that already holds gsm8k/{{test,train}}.jsonl"""


class FetchError(Exception):
    pass


def _fail(msg: str, hint: str | None = None, code: int = BAD_INPUT):
    raise CookbookError(msg, help=hint, exit_code=code)


FOLDER_HELP = "pass --data-dir DIR (a folder you can write) or set COOKBOOK_DATA to one"


def _data_dir(data_dir: Path | None) -> Path:
    from cookbook.gates.data import default_data_dir

    return data_dir if data_dir is not None else default_data_dir()


@click.group("data")
def data_group():
    """Gate data: what is built in, and fetching what is not (GSM8K).

    \b
    The embedded default (gemma3-270m-cpu) needs only the built-in data: the prose
    haystack `builtin:cookbook-prose` and the prompts `builtin:cookbook-tasks`, inside
    the package. GSM8K (for the gsm8k gate and `spec_acceptance: {prompts: gsm8k}`) and
    haystack files such as moby-dick.txt live in the data folder: $COOKBOOK_DATA, else
    .cache/data in the checkout. gates/README.md ('Gate data') says more.
    """


@data_group.command("path")
def path_cmd():
    """Print the data folder the gates read (and `fetch` writes), and what it holds."""
    from cookbook.gates import gatedata
    from cookbook.gates.data import DATA_ENV

    d = _data_dir(None)
    if d.exists() and not d.is_dir():
        kind = file_kind(d.stat().st_mode)
        _fail(f"{printable(d)}: is a {kind}, not a folder, so it cannot be the data folder", FOLDER_HELP)
    click.echo(str(d))
    click.echo(f"  from: {'$' + DATA_ENV if os.environ.get(DATA_ENV) else 'the default (.cache/data in the checkout)'}")
    gsm = [s for s in SPLITS if (d / "gsm8k" / f"{s}.jsonl").is_file()]
    hay = sorted(p.name for p in (d / "haystack").glob("*.txt")) if (d / "haystack").is_dir() else []
    click.echo(f"  gsm8k: {', '.join(f'{s}.jsonl' for s in gsm) if gsm else 'absent (cookbook maint data fetch)'}")
    click.echo(f"  haystack: {', '.join(hay) if hay else 'none'}")
    click.echo(
        f"  built in: {gatedata.HAYSTACK} ({len(gatedata.haystack_files())} texts), "
        f"{gatedata.TASKS} ({len(gatedata.tasks())} prompts)"
    )


@data_group.command("fetch")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where gsm8k/ goes (default $COOKBOOK_DATA, else .cache/data in the checkout).",
)
@click.option(
    "--revision", default="main", show_default=True, help="Hub revision (branch, tag or commit) of openai/gsm8k."
)
@click.option(
    "--force", is_flag=True, help="Download again even when gsm8k/ is already there (replaced only on success)."
)
def fetch_cmd(data_dir, revision, force):
    """Download GSM8K into DATA_DIR/gsm8k/ from the Hugging Face Hub.

    \b
    What it does: downloads the Hub dataset openai/gsm8k, config `main`, splits test
    (1,319 problems) and train (7,473), as parquet with huggingface_hub (endpoint
    $HF_ENDPOINT, default https://huggingface.co), and writes
      gsm8k/test.jsonl, gsm8k/train.jsonl   one {"question", "answer"} object a line
      gsm8k/LICENSE                        GSM8K's MIT licence (OpenAI, openai/grade-school-math)
      gsm8k/SOURCE                         endpoint, revision, date, row counts, sha256
    All of it is written under a temporary name and renamed into place at the end, so a
    failed fetch leaves nothing half-written (and an existing gsm8k/ as it was).
    Needs the `data` extra: pip install -e '.[data]' (huggingface_hub, pyarrow).
    Where the Hub cannot be reached it stops with the reason and how to get the files by hand.
    """
    target_root = _data_dir(data_dir)
    target = target_root / "gsm8k"
    if not force and all((target / f"{s}.jsonl").is_file() for s in SPLITS):
        click.echo(f"GSM8K is already in {target} (--force downloads it again)")
        return
    try:
        import huggingface_hub  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError as e:
        _fail(
            f"cookbook maint data fetch needs huggingface_hub and pyarrow ({e})",
            "install the data extra: .venv/bin/pip install -e '.[data]'",
        )
    if target_root.exists() and not target_root.is_dir():
        _fail(f"{printable(target_root)}: not a directory", FOLDER_HELP)
    probe = target_root if target_root.exists() else next(p for p in target_root.parents if p.exists())
    if not os.access(probe, os.W_OK | os.X_OK):
        _fail(f"{printable(probe)}: not writable, so GSM8K cannot be written under it", FOLDER_HELP)
    endpoint = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    click.echo(
        f"fetching {REPO_ID} (config {CONFIG}, {'/'.join(SPLITS)}) from {endpoint} into {target} "
        "(network errors are retried for about half a minute)"
    )
    from cookbook.reachable import why_not

    if why := why_not(f"{endpoint}/api/datasets/{REPO_ID}"):  # the Hub client would retry a stalled one for minutes
        raise CookbookError(
            f"could not download {REPO_ID} (config {CONFIG}, {SPLITS[0]} split) from {endpoint}: {why}",
            help=f"nothing was written; {BY_HAND.format(target=target)}",
            exit_code=FAILED,
        )
    try:
        fetch_gsm8k(target, endpoint, revision, echo=click.echo)
    except FetchError as e:
        raise CookbookError(
            str(e), help=f"nothing was written to {target}; " + BY_HAND.format(target=target), exit_code=FAILED
        ) from None
    click.echo(f"wrote {target}/: {', '.join(sorted(p.name for p in target.iterdir()))}")


def _reason(exc: BaseException) -> str:
    """The innermost cause's message (a connection error hides under the Hub client's own), one line."""
    chain, e = [], exc
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    inner = chain[-1]
    first = (str(inner).strip().splitlines() or [""])[0][:300]
    return f"{type(inner).__name__}: {first}" if first else type(inner).__name__


def _rows(parquet: Path, split: str) -> list[dict]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(parquet, columns=["question", "answer"])
    except Exception as e:  # ArrowInvalid, a missing column, a truncated file
        raise FetchError(f"{REPO_ID} {split} split: the downloaded file is not GSM8K parquet ({_reason(e)})") from e
    rows = table.to_pylist()
    if not rows:
        raise FetchError(f"{REPO_ID} {split} split: the downloaded file holds no rows")
    for i, r in enumerate(rows):
        if not (isinstance(r["question"], str) and isinstance(r["answer"], str) and "####" in r["answer"]):
            raise FetchError(f"{REPO_ID} {split} split, row {i}: expected a question and an answer ending in '#### N'")
    return rows


def fetch_gsm8k(target: Path, endpoint: str, revision: str = "main", echo=print) -> None:
    """Download, convert and place target/ (test.jsonl, train.jsonl, LICENSE, SOURCE) atomically."""
    import logging

    from huggingface_hub import hf_hub_download

    # The Hub client retries network errors for about 25 s, logging each try; the one message is ours.
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    from cookbook.files import atomic_dir

    with atomic_dir(target, force=True) as tmp:
        source = {
            "endpoint": endpoint,
            "dataset": REPO_ID,
            "config": CONFIG,
            "revision": revision,
            "fetched": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "files": {},
        }
        for split, filename in FILES.items():
            try:
                local = Path(
                    hf_hub_download(
                        REPO_ID,
                        filename,
                        repo_type="dataset",
                        revision=revision,
                        endpoint=endpoint,
                        cache_dir=tmp / ".hub",
                        token=False,
                    )
                )
            except Exception as e:  # connection refused, DNS, HTTP 404/5xx, offline mode
                raise FetchError(
                    f"could not download {REPO_ID} (config {CONFIG}, {split} split) from {endpoint}: {_reason(e)}"
                ) from e
            parts = local.parts
            if "snapshots" in parts:
                source["commit"] = parts[parts.index("snapshots") + 1]
            rows = _rows(local, split)
            text = "".join(json.dumps({"question": r["question"], "answer": r["answer"]}) + "\n" for r in rows)
            (tmp / f"{split}.jsonl").write_text(text, encoding="utf-8")
            source["files"][f"{split}.jsonl"] = {
                "from": filename,
                "rows": len(rows),
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
            }
            echo(f"  {split}: {len(rows)} problems")
        shutil.rmtree(tmp / ".hub")
        (tmp / "LICENSE").write_text(
            f"GSM8K, from the Hugging Face Hub dataset {REPO_ID} (config {CONFIG}), the dataset of\n"
            "https://github.com/openai/grade-school-math, under its MIT licence:\n\n" + MIT_LICENSE,
            encoding="utf-8",
        )
        (tmp / "SOURCE").write_text(json.dumps(source, indent=2) + "\n", encoding="utf-8")
