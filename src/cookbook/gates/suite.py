"""The gate suite in this process, on a recipe already resolved: options checked, the bundle written,
the tables printed. The one way every command runs the gates: `gates run`, `serve --gates` and
`--calibrate`, `maint upgrade` and `maint bisect` (through cookbook.upgrade.gates) all call `run`.

    result = run(resolved, "http://127.0.0.1:8000", SuiteOptions(only=("greedy",)))
    result.exit_code        # 0: every gate that ran passed; 1: not
    result.bundle           # the bundle folder; result.doc is its results.json

Bad options raise CookbookError before any request and before any file is written; so does a
server that does not answer (nothing ran, so there is no evidence). `run_reported` is `run` for a
caller that goes on after the gates (serve stops its server, upgrade writes its report): an error is
printed as the command line prints it and becomes the exit code.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from cookbook.errors import FAILED, CookbookError
from cookbook.files import atomic_write, repo_root

REQUEST_TIMEOUT_S = 600.0  # each request's total deadline, unless --request-timeout-s


def say(line: str) -> None:
    """The default echo: a line on stdout, flushed (so it keeps its place beside stderr's steps)."""
    print(line, flush=True)


@dataclass(frozen=True)
class SuiteOptions:
    """What `cookbook gates run` takes besides the recipe and the server (its flags, by the same names)."""

    only: tuple[str, ...] = ()
    data_dir: Path | None = None
    gsm8k: Path | None = None
    haystack: Path | None = None
    out: Path | None = None
    env_lock: Path | None = None
    env_lock_cmd: str | None = None
    image_digest: str | None = None
    image_ref: str | None = None
    model: str | None = None
    request_timeout_s: float = REQUEST_TIMEOUT_S
    suite_timeout_s: float | None = None


@dataclass(frozen=True)
class SuiteRun:
    bundle: Path
    doc: dict  # the bundle's results.json

    @property
    def exit_code(self) -> int:
        from cookbook.gates.runner import exit_code

        return exit_code(self.doc)


@dataclass(frozen=True)
class _Environment:
    """What the bundle says the server ran in: a lock file's text and where it came from, or an image."""

    lock_text: str | None = None
    source: str | None = None
    image: dict | None = None


def _check_base_url(base_url: str) -> None:
    from cookbook.untrusted import http_url_problem, printable

    if why := http_url_problem(base_url):
        raise CookbookError(
            f"--base-url {printable(base_url[:200])}: {why}",
            help="give the server's address, e.g. http://127.0.0.1:8000",
        )


def _check_declared(resolved, only: tuple[str, ...]) -> None:
    declared = resolved.recipe.gates.declared()
    if not declared:
        raise CookbookError(
            f"recipe {resolved.slug} declares no gates, so there is nothing to run",
            help="declare the gates its source document verified it with under `gates:` in "
            f"{resolved.path} (gates/README.md lists them)",
        )
    missing = [g for g in only if g not in declared]
    if missing:
        raise CookbookError(
            f"--only {', '.join(missing)}: not declared in recipe {resolved.slug} (declares: {declared or 'none'})",
            help="declare the gate under `gates:` in the recipe, or drop it from --only",
        )


def _data_dir(options: SuiteOptions) -> tuple[Path, str | None]:
    """The gate data folder and the flag or variable that named it (None: the default, may be absent)."""
    from cookbook.gates.data import DATA_ENV, default_data_dir

    data_dir, data_from = options.data_dir, "--data-dir"
    if data_dir is None:
        data_dir = default_data_dir()
        data_from = f"${DATA_ENV}" if os.environ.get(DATA_ENV) else None
    # An absent default is fine (built-in data needs none; a gate that reads a file says how to fetch it);
    # a folder the user named must exist.
    if data_from is not None and not data_dir.is_dir():
        raise CookbookError(
            f"gate data not found: {data_from} {data_dir} is not a directory",
            help="`cookbook maint data fetch` fills the default (.cache/data); gates/README.md ('Gate data') says more",
        )
    for flag, p in (("--gsm8k", options.gsm8k), ("--haystack", options.haystack)):
        if p is not None and not p.is_dir():
            raise CookbookError(
                f"{flag} {p}: not a directory", help="see gates/README.md ('Gate data') for how to fetch the data"
            )
    return data_dir, data_from


def _environment(options: SuiteOptions) -> _Environment:
    given = (options.env_lock, options.env_lock_cmd, options.image_digest, options.image_ref)
    if sum(x is not None for x in given) > 1:
        raise CookbookError("give only one of --env-lock, --env-lock-cmd, --image-digest, --image")
    if options.image_ref is not None:
        from cookbook.image.build import identity

        return _Environment(image=identity(options.image_ref))
    if options.env_lock is not None:
        if not options.env_lock.is_file():
            raise CookbookError(
                f"--env-lock {options.env_lock}: no such file",
                help="write it with `<serving python> -m pip freeze > FILE`",
            )
        return _Environment(options.env_lock.read_text(encoding="utf-8"), str(options.env_lock))
    if options.env_lock_cmd:
        proc = subprocess.run(shlex.split(options.env_lock_cmd), capture_output=True, text=True)
        if proc.returncode != 0:
            raise CookbookError(
                f"--env-lock-cmd {options.env_lock_cmd!r} exited {proc.returncode}: {proc.stderr.strip()[:300]}"
            )
        return _Environment(proc.stdout, options.env_lock_cmd)
    return _Environment()


def _out_dir(resolved, out: Path | None) -> Path:
    if out is None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out = repo_root() / "runs" / f"{resolved.slug}-{stamp}"
    if out.exists() and any(out.iterdir()):
        raise CookbookError(
            f"--out {out} exists and is not empty", help="choose a new directory; bundles are never overwritten"
        )
    return out


def _config(resolved, base_url: str, options: SuiteOptions, environment: _Environment, out: Path, data_dir: Path, echo):
    from cookbook.gates.bundle import serving_env
    from cookbook.gates.data import DataPaths
    from cookbook.gates.runner import SuiteConfig

    serve = resolved.recipe.serve
    return SuiteConfig(
        base_url=base_url,
        model=options.model or str(serve.arg("served_model_name") or serve.model),
        spec=resolved.recipe.gates,
        out_dir=out,
        data=DataPaths.from_data_dir(data_dir, options.gsm8k, options.haystack),
        only=list(options.only) or None,
        header={
            "recipe": resolved.slug,
            "recipe_hash": resolved.content_hash,
            "quant": resolved.quant,
            "data_dir": str(data_dir),
            # What the recipe does not say but shaped the run: the serving variables of this
            # environment (the server's, when it was started from it: `cookbook serve`, gates/run.sh).
            "serving_env": {
                "source": "the environment of `cookbook gates run`",
                "variables": serving_env(dict(os.environ), set(resolved.recipe.env)),
            },
        },
        env_lock_text=environment.lock_text,
        env_lock_source=environment.source,
        image=environment.image,
        image_digest=options.image_digest,
        request_timeout_s=options.request_timeout_s,
        suite_timeout_s=options.suite_timeout_s,
        echo=echo,
    )


def _refuse_unreachable(resolved, base_url: str) -> None:
    """A server that is not there is one message and no bundle: nothing ran, so there is no evidence."""
    from cookbook.gates.runner import unreachable
    from cookbook.untrusted import printable

    if why := unreachable(base_url):
        raise CookbookError(
            f"no server answers at {printable(base_url[:200])}: {why}",
            help=f"start it first (`cookbook serve {resolved.slug} --keep-running`, or the block of "
            f"`cookbook launch {resolved.slug}`), or give its address with --base-url; no bundle was written",
            exit_code=FAILED,
            location="--base-url",
        )


def _print_tables(doc: dict, bundle, echo) -> None:
    from cookbook.gates.runner import summary_table

    table = summary_table(doc)
    bundle.write_text("summary.txt", table + "\n")
    echo("\n" + table)
    if "speed" in doc["gates"] and doc["gates"]["speed"]["measured"].get("sweep"):
        from cookbook.gates.speed import sweep_table

        echo("\n" + sweep_table(doc["gates"]["speed"]["measured"]["sweep"]))


def run(resolved, base_url: str, options: SuiteOptions = SuiteOptions(), echo: Callable[[str], None] = say) -> SuiteRun:
    """The recipe's declared gates (options.only of them) against the server at base_url, into a
    new bundle; every line through `echo`. Raises CookbookError for bad input or no server."""
    from cookbook.gates.runner import run_suite

    _check_base_url(base_url)
    _check_declared(resolved, options.only)
    data_dir, data_from = _data_dir(options)
    environment = _environment(options)
    out = _out_dir(resolved, options.out)
    cfg = _config(resolved, base_url, options, environment, out, data_dir, echo)
    _refuse_unreachable(resolved, base_url)
    echo(f"gates for {resolved.slug} ({resolved.content_hash[:19]}) against {base_url}, model {cfg.model}")
    absent = "" if data_dir.is_dir() else "; absent: only built-in data"
    echo(f"gate data: {data_dir} ({data_from or 'default'}{absent})")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "recipe.resolved.json", json.dumps(resolved.recorded, indent=2, default=str) + "\n")
    bundle = asyncio.run(run_suite(cfg))
    _print_tables(bundle.doc, bundle, echo)
    echo(f"\nbundle: {out}")
    return SuiteRun(out, bundle.doc)


def run_reported(
    resolved, base_url: str, options: SuiteOptions = SuiteOptions(), echo: Callable[[str], None] = say
) -> int:
    """`run` for a caller that goes on after the gates: its exit code. A CookbookError is printed as
    `error: ...` (its exit code returned), a bug in the suite as its traceback (exit 1), as when the
    gates ran as a child process `cookbook gates run`."""
    try:
        return run(resolved, base_url, options, echo).exit_code
    except CookbookError as e:
        e.show()
        return e.exit_code
    except Exception:
        traceback.print_exc()
        return FAILED
    finally:
        sys.stdout.flush()  # the suite's tables before the caller's next step (stderr)
