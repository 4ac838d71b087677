"""`cookbook maint buckets generate | check`: Gaudi warm-up bucket files (logic in cookbook.buckets)."""

from __future__ import annotations

from pathlib import Path

import click

from cookbook.buckets import all_specs, check_against, generated_text, load_spec, parse, specs_dir
from cookbook.errors import FAILED, CookbookError
from cookbook.files import repo_root


@click.group("buckets")
def buckets_cmd():
    """Gaudi warm-up bucket files: generate them from a geometry, check them."""


@buckets_cmd.command("generate")
@click.argument("specs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--check", is_flag=True, help="Write nothing; fail if a committed file is stale.")
def generate_cmd(specs, check):
    """Write the bucket file of each spec (default: every serving/buckets/*.yaml)."""
    from cookbook.generated_files import write_or_check

    root = repo_root()
    loaded = [load_spec(p.resolve(), root) for p in specs] if specs else all_specs(root)
    if not loaded:
        raise CookbookError(f"no bucket specs under {specs_dir(root)}")
    n = write_or_check(
        {root / spec.output: generated_text(spec, root) for spec in loaded},
        check=check,
        command="cookbook buckets generate",
    )
    if check:
        click.echo(f"{n} bucket file(s) up to date")


@buckets_cmd.command("check")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--spec", type=click.Path(path_type=Path), help="Also check every bucket against this geometry.")
def check_cmd(file, spec):
    """Validate a VLLM_BUCKETING_FROM_FILE file: format, duplicates, and (with --spec) fit."""
    if not file.is_file():
        raise CookbookError(
            f"{file}: no such file", help="pass the bucket file a recipe's VLLM_BUCKETING_FROM_FILE names"
        )
    prompt, decode = parse(file.read_text(errors="replace"), str(file))
    problems = check_against(load_spec(spec.resolve(), repo_root()).geometry, prompt, decode, str(file)) if spec else []
    if problems:
        raise CookbookError(
            f"{len(problems)} bucket(s) do not fit {spec}:\n  " + "\n  ".join(problems),
            help=f"regenerate it with `cookbook maint buckets generate`, or fix {spec}",
            exit_code=FAILED,
        )
    click.echo(f"{file}: {len(prompt)} prompt and {len(decode)} decode buckets, format ok")
