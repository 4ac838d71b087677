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


@engine_check.command("fit")
@click.argument("slug")
@click.argument("config_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--env", "env_file", type=click.Path(path_type=Path, dir_okay=False), help="A run's env.txt: its card.")
@click.option("--device-mib", type=click.IntRange(1024, 16 * 2**20), help="The card's memory in MiB (torch's total).")
@click.option(
    "--write",
    "write_to",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the config.json to serve: CONFIG_FILE when it fits, else it at the most layers that do.",
)
def fit_cmd(slug, config_file, env_file, device_mib, write_to):
    """Whether CONFIG_FILE's reduced-depth checkpoint fits one card for SLUG's engine check: the
    random weights while vLLM fills them, and a KV pool for one max_model_len sequence. Exit 1 when
    it does not fit (and, with --write, no depth of it does); nothing is launched.

      cookbook maint engine-check fit glm52-fp8-8x-h200 recipes/glm52-fp8-8x-h200/engine-check/config.json --device-mib 81079
    """
    import json

    from cookbook.evidence.engine_check import config_of, read_limited
    from cookbook.evidence.engine_check_fit import at_depth, card_mib, deepest_fitting, estimate
    from cookbook.files import atomic_write
    from cookbook.units import gib

    resolved = resolve_or_refuse(slug, None, (), f"cannot check {slug}'s engine-check checkpoint")
    if (env_file is None) == (device_mib is None):
        raise CookbookError("name the card once: --env FILE or --device-mib N", help="e.g. --device-mib 81079")
    try:
        config = config_of(read_limited(config_file, 1 << 20))
        if config["num_hidden_layers"] >= 10_000:  # the fit tries each depth below it
            raise ValueError("num_hidden_layers is 10,000 or more")
    except (ValueError, RecursionError) as e:
        raise CookbookError(f"{config_file}: {e}", help="pass a checkpoint's config.json") from None
    if env_file is None:
        card = f"a card of {device_mib:,} MiB"
    else:
        try:
            name, device_mib = card_mib(read_limited(env_file, 1 << 16), resolved)
        except ValueError as e:
            raise CookbookError(f"{env_file}: {e}", help="pass the env.txt of a run on the recipe's GPU kind") from None
        card = f"one {name} ({device_mib:,} MiB)"
    try:
        fit = estimate(resolved, config, device_mib)
    except (ValueError, KeyError, TypeError, OverflowError) as e:
        raise CookbookError(
            f"{config_file}: its geometry cannot be planned ({e})", help="pass a checkpoint's config.json"
        ) from None
    said = f"{config_file} at {fit.layers} layers on {card}"
    serve = config
    if fit.unknown:
        click.echo(f"cannot tell: {said}: {fit.unknown}; served as it is")
    elif not fit.reasons():
        click.echo(
            f"fits: {said}: weights ~{gib(fit.weights_bytes)}, load peak ~{gib(fit.load_peak_bytes)}"
            f" of {gib(fit.device_bytes)}, KV pool ~{gib(fit.pool_bytes)}"
        )
    else:
        deepest = deepest_fitting(resolved, config, device_mib)
        if write_to is None or deepest is None:
            raise CookbookError(
                f"does not fit: {said}: {'; '.join(fit.reasons())}",
                help=(
                    f"{deepest} layers fit this card: a config.json with num_hidden_layers {deepest}, or --write FILE"
                    if deepest
                    else "no depth of this checkpoint fits this card: a larger card"
                ),
                exit_code=FAILED,
            )
        serve = at_depth(config, deepest)
        click.echo(f"reduced: {said}: {'; '.join(fit.reasons())}")
    if write_to is not None:
        atomic_write(write_to, json.dumps(serve, indent=2) + "\n")
        if serve is not config:
            click.echo(f"wrote {write_to}: the same checkpoint at {serve['num_hidden_layers']} layers, which fit")
