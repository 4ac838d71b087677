"""`cookbook gates run | verify`."""

from __future__ import annotations

import asyncio
import json
import math
import os
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import click

from cookbook.errors import FAILED, CookbookError
from cookbook.files import atomic_write, repo_root
from cookbook.recipe.gates_spec import GATE_NAMES

REQUEST_TIMEOUT_S = 600.0  # each request's total deadline, unless --request-timeout-s


def _resolve(recipe: str, action: str):
    from cookbook.commands.recipes import resolve_or_refuse

    return resolve_or_refuse(recipe, None, (), action)


def _finite(param, value):
    """click's FloatRange lets nan through (every comparison with it is false)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds", param=param)
    return value


@click.group()
def gates():
    """Run a recipe's gates against a live server; verify a recipe from the evidence."""


@gates.command("run")
@click.argument("recipe")
@click.option("--base-url", default="http://127.0.0.1:8000", show_default=True, help="OpenAI-compatible server.")
@click.option("--only", "only", multiple=True, type=click.Choice(GATE_NAMES), help="Run only these gates (repeatable).")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    help="Holds gsm8k/{train,test}.jsonl and haystack/*.txt (default $COOKBOOK_DATA, else .cache/data in "
    "the checkout, where `cookbook data fetch` writes). Built-in gate data needs none.",
)
@click.option("--gsm8k", type=click.Path(path_type=Path), help="GSM8K folder (overrides --data-dir).")
@click.option("--haystack", type=click.Path(path_type=Path), help="Haystack text folder (overrides --data-dir).")
@click.option("--out", type=click.Path(path_type=Path), help="Bundle directory (default runs/<recipe>-<UTC time>).")
@click.option(
    "--env-lock", type=click.Path(path_type=Path), help="pip freeze (or lock file) of the serving environment."
)
@click.option(
    "--env-lock-cmd",
    help="Command whose output is the serving environment's lock, e.g. '.venv/bin/python -m pip freeze'.",
)
@click.option("--image-digest", help="Digest of the serving image (sha256:...).")
@click.option(
    "--image",
    "image_ref",
    help="The serving image, e.g. cookbook/<slug>:<tag>: its ID and digest are read from the local Docker daemon.",
)
@click.option("--model", help="Served model name (default: the recipe's served_model_name).")
@click.option(
    "--request-timeout-s",
    default=REQUEST_TIMEOUT_S,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True, max=86400),
    callback=lambda ctx, param, v: _finite(param, v),
    help="Each request's total deadline.",
)
@click.option(
    "--suite-timeout-s",
    type=click.FloatRange(min=1, max=7 * 86400),
    callback=lambda ctx, param, v: _finite(param, v),
    help="Deadline of the whole suite (default: the declared gates' timeout_s added up, plus 120 s).",
)
def run_cmd(recipe, **options):
    """Run RECIPE's declared gates against BASE_URL and write an evidence bundle."""
    sys.exit(run_gates(_resolve(recipe, f"cannot run the gates of {recipe}"), **options))


def run_gates(
    resolved,
    *,
    base_url: str,
    only: tuple[str, ...] = (),
    data_dir: Path | None = None,
    gsm8k: Path | None = None,
    haystack: Path | None = None,
    out: Path | None = None,
    env_lock: Path | None = None,
    env_lock_cmd: str | None = None,
    image_digest: str | None = None,
    image_ref: str | None = None,
    model: str | None = None,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    suite_timeout_s: float | None = None,
) -> int:
    """`cookbook gates run` on an already resolved recipe: the gate suite in this process, its
    bundle written, the tables printed; the exit code (0: every gate that ran passed, 1: not).
    Bad input raises CookbookError before any request. `cookbook serve --gates` calls it too."""
    from cookbook.untrusted import http_url_problem, printable

    if why := http_url_problem(base_url):
        raise CookbookError(
            f"--base-url {printable(base_url[:200])}: {why}",
            help="give the server's address, e.g. http://127.0.0.1:8000",
        )
    from cookbook.gates.bundle import serving_env
    from cookbook.gates.data import DATA_ENV, DataPaths, default_data_dir
    from cookbook.gates.runner import SuiteConfig, exit_code, run_suite, summary_table

    spec = resolved.recipe.gates
    declared = spec.declared()
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
    data_from = "--data-dir"
    if data_dir is None:
        data_dir = default_data_dir()
        data_from = f"${DATA_ENV}" if os.environ.get(DATA_ENV) else None  # None: the default, may be absent
    # An absent default is fine (built-in data needs none; a gate that reads a file says how to fetch it);
    # a folder the user named must exist.
    if data_from is not None and not data_dir.is_dir():
        raise CookbookError(
            f"gate data not found: {data_from} {data_dir} is not a directory",
            help="`cookbook data fetch` fills the default (.cache/data); gates/README.md ('Gate data') says more",
        )
    for flag, p in (("--gsm8k", gsm8k), ("--haystack", haystack)):
        if p is not None and not p.is_dir():
            raise CookbookError(
                f"{flag} {p}: not a directory", help="see gates/README.md ('Gate data') for how to fetch the data"
            )
    lock_text = source = None
    if sum(x is not None for x in (env_lock, env_lock_cmd, image_digest, image_ref)) > 1:
        raise CookbookError("give only one of --env-lock, --env-lock-cmd, --image-digest, --image")
    image = None
    if image_ref is not None:
        from cookbook.image.build import identity

        image = identity(image_ref)
    if env_lock is not None:
        if not env_lock.is_file():
            raise CookbookError(
                f"--env-lock {env_lock}: no such file", help="write it with `<serving python> -m pip freeze > FILE`"
            )
        lock_text, source = env_lock.read_text(encoding="utf-8"), str(env_lock)
    elif env_lock_cmd:
        proc = subprocess.run(shlex.split(env_lock_cmd), capture_output=True, text=True)
        if proc.returncode != 0:
            raise CookbookError(
                f"--env-lock-cmd {env_lock_cmd!r} exited {proc.returncode}: {proc.stderr.strip()[:300]}"
            )
        lock_text, source = proc.stdout, env_lock_cmd
    if out is None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out = repo_root() / "runs" / f"{resolved.slug}-{stamp}"
    if out.exists() and any(out.iterdir()):
        raise CookbookError(
            f"--out {out} exists and is not empty", help="choose a new directory; bundles are never overwritten"
        )
    serve = resolved.recipe.serve
    model = model or str(serve.arg("served_model_name") or serve.model)
    cfg = SuiteConfig(
        base_url=base_url,
        model=model,
        spec=spec,
        out_dir=out,
        data=DataPaths.from_data_dir(data_dir, gsm8k, haystack),
        only=list(only) or None,
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
        env_lock_text=lock_text,
        env_lock_source=source,
        image=image,
        image_digest=image_digest,
        request_timeout_s=request_timeout_s,
        suite_timeout_s=suite_timeout_s,
        echo=click.echo,
    )
    click.echo(f"gates for {resolved.slug} ({resolved.content_hash[:19]}) against {base_url}, model {model}")
    click.echo(
        f"gate data: {data_dir} ({data_from or 'default'}"
        + ("" if data_dir.is_dir() else "; absent: only built-in data")
        + ")"
    )
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "recipe.resolved.json", json.dumps(resolved.recorded, indent=2, default=str) + "\n")
    bundle = asyncio.run(run_suite(cfg))
    table = summary_table(bundle.doc)
    bundle.write_text("summary.txt", table + "\n")
    click.echo("\n" + table)
    if "speed" in bundle.doc["gates"] and bundle.doc["gates"]["speed"]["measured"].get("sweep"):
        from cookbook.gates.speed import sweep_table

        click.echo("\n" + sweep_table(bundle.doc["gates"]["speed"]["measured"]["sweep"]))
    click.echo(f"\nbundle: {out}")
    return exit_code(bundle.doc)


@gates.command("calibrate")
@click.argument("recipe")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option("--dry-run", is_flag=True, help="Print the new bars; change nothing.")
def calibrate_cmd(recipe, bundle, dry_run):
    """Set RECIPE's bars from a calibration run's BUNDLE, by the rules in cookbook.gates.calibrate.

    \b
    Each threshold becomes a stated margin on the figure it judges (throughput floors half the
    measured, latency ceilings twice it, ...), and every gate's calibrated_on names the run. The
    verified block is removed: verify the recipe with a second gate run against the new bars.
      cookbook gates run gemma3-270m-h200 --out runs/cal    # the calibration run
      cookbook gates calibrate gemma3-270m-h200 runs/cal
      cookbook gates run gemma3-270m-h200 --out runs/ver && cookbook gates verify gemma3-270m-h200 runs/ver
    """
    import yaml

    from cookbook.gates.calibrate import calibrated_gates, environment_line
    from cookbook.recipe.calibrated import with_gates

    resolved = _resolve(recipe, f"cannot calibrate {recipe}")
    try:
        results = json.loads((bundle / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CookbookError(f"{bundle}: no readable results.json ({e})", help="give the bundle of a gate run") from None
    if results.get("recipe") != resolved.slug:
        raise CookbookError(f"{bundle}: a bundle of {results.get('recipe')!r}, not {resolved.slug}")
    own = yaml.safe_load(resolved.path.read_text(encoding="utf-8")).get("gates")
    if not isinstance(own, dict):
        raise CookbookError(f"{resolved.path}: no gates of its own to calibrate (they come from the recipe it extends)")
    lock = bundle / "environment.lock"
    engine = resolved.recipe.image.engine
    profile = resolved.recipe.image.fixes.profile
    where = environment_line(lock.read_text(encoding="utf-8") if lock.is_file() else "")
    where += f", {engine.package} {engine.version}" + (f" + fix profile {profile}" if profile else "")
    try:
        gates_new, changes = calibrated_gates(
            own, results, date=str(results.get("finished", ""))[:10], where=where, bundle=bundle.name
        )
        text = with_gates(resolved.path.read_text(encoding="utf-8"), gates_new)
    except ValueError as e:
        raise CookbookError(f"cannot calibrate {resolved.slug} from {bundle}: {e}", exit_code=FAILED) from None
    for c in changes:
        click.echo(f"{c.gate}.{c.field}: {c.old!r} -> {c.new:g}  (measured {c.figure:g}; {c.says})")
    if dry_run:
        click.echo("dry run: nothing written")
        return
    atomic_write(resolved.path, text)
    click.echo(f"wrote {len(changes)} bars into {resolved.path}; now verify with a second gate run")


@gates.command("compact")
@click.argument("bundle", type=click.Path(path_type=Path, file_okay=False, exists=True))
def compact_cmd(bundle):
    """gzip BUNDLE's transcripts (and rewrite its manifest) before committing it beside a recipe.

    `gates verify` and the status re-check read transcripts/<gate>.jsonl or .jsonl.gz alike.
    """
    from cookbook.evidence.manifest import check_manifest
    from cookbook.gates.bundle import MANIFEST, compact, compact_leftovers

    if not (bundle / MANIFEST).is_file():
        raise CookbookError(f"{bundle}: no {MANIFEST}, so not a finished evidence bundle")
    for rel in compact_leftovers(bundle):
        click.echo(f"{rel}: removed, left by an interrupted compact (its content is in the other form)")
    problems = check_manifest(bundle)
    if problems:  # never re-seal a bundle whose files no longer match what the run wrote
        raise CookbookError(f"{bundle}: refused, its files do not match its manifest: " + "; ".join(problems))
    for name, before, after in compact(bundle):
        click.echo(f"{name}: {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB (.gz)")


@gates.command("verify")
@click.argument("recipe")
@click.argument("bundle", type=click.Path(path_type=Path))
def verify_cmd(recipe, bundle):
    """Write RECIPE's verified block from BUNDLE, only if every declared gate passed on this recipe."""
    from cookbook.evidence.verify import verify

    resolved = _resolve(recipe, f"cannot verify {recipe}")
    if not (bundle / "results.json").is_file():
        raise CookbookError(
            f"{bundle}: no results.json, so not an evidence bundle", help="run gates/run.sh RECIPE first"
        )
    try:
        reasons, block = verify(resolved, bundle)
    except ValueError as e:  # the recipe's own text cannot take the block (with_block says why)
        raise CookbookError(f"{resolved.path}: {e}") from None
    if reasons:
        stays = "unverified" if not resolved.data.get("verified") else "as it was"
        raise CookbookError(
            f"refused: {resolved.slug} stays {stays}:\n" + "\n".join(f"  - {r}" for r in reasons), exit_code=FAILED
        )
    click.echo(
        f"verified: wrote the verified block of {resolved.path} ({block['recipe_hash'][:19]}, "
        f"{len(block['gates'])} gates)"
    )
