"""`cookbook maint engine-check`: write and re-check a recipe's engine-checked status
(cookbook.evidence.engine_check)."""

from __future__ import annotations

from pathlib import Path

import click

from cookbook.cli_options import resolve_or_refuse
from cookbook.errors import BAD_INPUT, FAILED, CookbookError

EXPLAINABLE = ("kv_bytes_per_token", "pool_gib", "pool_tokens", "max_concurrency")


def _explanations(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for p in pairs:
        key, sep, text = p.partition("=")
        if not sep or key not in EXPLAINABLE or not text.strip():
            raise CookbookError(
                f"--explain {p!r}: expected KEY=TEXT with KEY one of {', '.join(EXPLAINABLE)}",
                help="e.g. --explain pool_gib='vLLM reserves ...'",
                exit_code=BAD_INPUT,
            )
        out[key] = text.strip()
    return out


@click.group("engine-check")
def engine_check():
    """The engine-checked status: a recipe's exact launch block served on its GPU kind (one GPU,
    an architecture-faithful checkpoint with random weights), its KV pool against the plan's."""


@engine_check.command("write")
@click.argument("slug")
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--explain", multiple=True, help="KEY=TEXT: why a figure is more than 5% off the plan's.")
def write_cmd(slug, run_dir, explain):
    """Write recipes/SLUG/evidence/engine-check/<stamp>/ from a run folder of
    scripts/offline-gpu/engine-check; refused (exit 1, nothing written) when the run does not earn it.
    RUN_DIR may be an existing bundle: its run files are planned again (vLLM's figures as that run
    measured them, the plan's recomputed), and the new bundle records which one it came from."""
    from cookbook.evidence.engine_check import write

    resolved = resolve_or_refuse(slug, None, (), f"cannot engine-check {slug}")
    if not run_dir.is_dir():
        raise CookbookError(
            f"{run_dir} is not a folder",
            help="pass a run folder of scripts/offline-gpu/engine-check",
            exit_code=BAD_INPUT,
        )
    try:
        dest = write(run_dir, resolved, _explanations(explain))
    except ValueError as e:
        raise CookbookError(
            f"{slug} does not earn engine-checked: {e}", help="see the run's server.log", exit_code=FAILED
        ) from None
    click.echo(f"engine-checked: {dest}")


@engine_check.command("status")
@click.argument("slug")
def status_cmd(slug):
    """The engine-check status of SLUG and every reason behind a refusal (exit 1 unless engine-checked)."""
    from cookbook.evidence.engine_check import ENGINE_CHECKED, status

    resolved = resolve_or_refuse(slug, None, (), f"cannot engine-check {slug}")
    word, reasons = status(resolved)
    click.echo(f"{slug}: {word or 'not engine-checked (no bundle)'}")
    for r in reasons:
        click.echo(f"  - {r}")
    if word != ENGINE_CHECKED:
        raise SystemExit(FAILED)
