"""`cookbook buckets generate | check`: Gaudi warm-up bucket files (logic in cookbook.buckets)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cookbook.buckets import BucketError, all_specs, check_against, generated_text, load_spec, parse, specs_dir


def _root() -> Path:
    from cookbook.files import repo_root

    return repo_root()


def _fail(message: str, help: str | None = None) -> None:
    click.echo(f"error: {message}", err=True)
    if help:
        click.echo(f"  help: {help}", err=True)
    sys.exit(2)


@click.group("buckets")
def buckets_cmd():
    """Gaudi warm-up bucket files: generate them from a geometry, check them."""


@buckets_cmd.command("generate")
@click.argument("specs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--check", is_flag=True, help="Write nothing; fail if a committed file is stale.")
def generate_cmd(specs, check):
    """Write the bucket file of each spec (default: every serving/buckets/*.yaml)."""
    import difflib

    root = _root()
    try:
        loaded = [load_spec(p.resolve(), root) for p in specs] if specs else all_specs(root)
    except BucketError as exc:
        _fail(str(exc), "see serving/buckets/README.md for the spec format")
    if not loaded:
        _fail(f"no bucket specs under {specs_dir(root)}")
    stale = 0
    for spec in loaded:
        target = root / spec.output
        text = generated_text(spec, root)
        current = target.read_text() if target.is_file() else ""
        if current == text:
            click.echo(f"{spec.output}: up to date")
            continue
        if check:
            stale += 1
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), str(spec.output),
                                        "generated", lineterm="")
            click.echo("\n".join(list(diff)[:60]), err=True)
            click.echo(f"error: {spec.output} is stale; run `cookbook buckets generate` and commit it",
                       err=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(target)
        click.echo(f"{spec.output}: written")
    sys.exit(1 if stale else 0)


@buckets_cmd.command("check")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--spec", type=click.Path(path_type=Path), help="Also check every bucket against this geometry.")
def check_cmd(file, spec):
    """Validate a VLLM_BUCKETING_FROM_FILE file: format, duplicates, and (with --spec) fit."""
    if not file.is_file():
        _fail(f"{file}: no such file", "pass the bucket file a recipe's VLLM_BUCKETING_FROM_FILE names")
    try:
        prompt, decode = parse(file.read_text(errors="replace"), str(file))
        problems = check_against(load_spec(spec.resolve(), _root()).geometry, prompt, decode, str(file)) \
            if spec else []
    except BucketError as exc:
        _fail(str(exc))
    for p in problems:
        click.echo(f"error: {p}", err=True)
    if problems:
        sys.exit(1)
    click.echo(f"{file}: {len(prompt)} prompt and {len(decode)} decode buckets, format ok")
