"""`cookbook gates run | verify`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cookbook.cli_options import finite, resolve_or_refuse
from cookbook.errors import FAILED, CookbookError
from cookbook.gates.suite import REQUEST_TIMEOUT_S
from cookbook.recipe.gates_spec import GATE_NAMES


def _resolve(recipe: str, action: str):
    return resolve_or_refuse(recipe, None, (), action)


@click.command("run")
@click.argument("recipe")
@click.option("--base-url", default="http://127.0.0.1:8000", show_default=True, help="OpenAI-compatible server.")
@click.option("--only", "only", multiple=True, type=click.Choice(GATE_NAMES), help="Run only these gates (repeatable).")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    help="Holds gsm8k/{train,test}.jsonl and haystack/*.txt (default $COOKBOOK_DATA, else .cache/data in "
    "the checkout, where `cookbook maint data fetch` writes). Built-in gate data needs none.",
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
    callback=lambda ctx, param, v: finite(param, v),
    help="Each request's total deadline.",
)
@click.option(
    "--suite-timeout-s",
    type=click.FloatRange(min=1, max=7 * 86400),
    callback=lambda ctx, param, v: finite(param, v),
    help="Deadline of the whole suite (default: the declared gates' timeout_s added up, plus 120 s).",
)
def run_cmd(recipe, base_url, **options):
    """Run RECIPE's declared gates against BASE_URL and write an evidence bundle."""
    from cookbook.gates.suite import SuiteOptions, run

    resolved = _resolve(recipe, f"cannot run the gates of {recipe}")
    sys.exit(run(resolved, base_url, SuiteOptions(**options), echo=click.echo).exit_code)


@click.command("calibrate")
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
      cookbook maint gates calibrate gemma3-270m-h200 runs/cal
      cookbook gates run gemma3-270m-h200 --out runs/ver && cookbook gates verify gemma3-270m-h200 runs/ver
    """
    from cookbook.gates.calibrate import calibrate_recipe

    calibrate_recipe(_resolve(recipe, f"cannot calibrate {recipe}"), bundle, dry_run=dry_run, echo=click.echo)


@click.command("compact")
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
        click.echo(
            f"{rel}: removed, left by an interrupted compact (its content is in the other form, or it was a temporary)"
        )
    problems = check_manifest(bundle)
    if problems:  # never re-seal a bundle whose files no longer match what the run wrote
        raise CookbookError(f"{bundle}: refused, its files do not match its manifest: " + "; ".join(problems))
    for name, before, after in compact(bundle):
        click.echo(f"{name}: {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB (.gz)")


@click.command("verify")
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
