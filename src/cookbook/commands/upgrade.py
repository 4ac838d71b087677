"""`cookbook maint upgrade SLUG --engine VERSION`: move a recipe's engine pin with evidence (cookbook.upgrade)."""

from __future__ import annotations

import datetime as dt
import shlex
import sys
from pathlib import Path

import click

from cookbook.errors import INTERRUPTED, CookbookError


@click.command("upgrade")
@click.argument("slug")
@click.option("--engine", "version", required=True, help="The engine version to move to (a release on the index).")
@click.option("--dry-run", is_flag=True, help="Install the engine and report each fix's status; no gates, no writes.")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Report folder (report.md, report.json, the bundle; default runs/upgrade-<slug>-<version>-<time>).",
)
@click.option(
    "--no-regression-tests",
    is_flag=True,
    help="Do not run the fixes' regression tests on the unpatched engine (no-longer-reproduces is not looked for).",
)
def upgrade_cmd(slug, version, dry_run, out, no_regression_tests):
    """Install SLUG's engine at VERSION in a scratch venv, report each fix of its profile (applies,
    absorbed, conflicts, no-longer-reproduces), run the recipe's gates against it with the fixes that
    still apply, and write a report. Only when every gate passed: the new fix profile, the new pin in
    the recipe and the evidence bundle, verified.

    \b
      cookbook maint upgrade gemma3-270m-cpu --engine 0.31.0 --dry-run
      cookbook maint upgrade gemma3-270m-cpu --engine 0.31.0 --out fixes/upgrades/0.31.0
    """
    from cookbook.files import out_dir_problem, repo_root
    from cookbook.recipe.resolve import all_slugs
    from cookbook.untrusted import printable
    from cookbook.upgrade.flow import run_upgrade
    from cookbook.upgrade.scratch import recipe_engine, release

    if slug not in all_slugs():
        raise CookbookError(f"unknown recipe {slug!r}", help="`cookbook list` names every recipe")
    version = release(version, "--engine", recipe_engine(slug)[0])  # before pip, a folder or a report sees it
    if out is None:
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out = repo_root() / "runs" / f"upgrade-{slug}-{version}-{stamp}"
    if why := out_dir_problem(out):  # before a scratch engine is installed, not after
        raise CookbookError(f"--out {printable(out)}: {why}", help="give a new --out folder")
    # the command line as typed: `cookbook maint upgrade ...` (or the old spelling, `cookbook upgrade ...`)
    typed = sys.argv[1:3] == ["maint", "upgrade"] or sys.argv[1:2] == ["upgrade"]
    command = shlex.join(["cookbook", *sys.argv[1:]]) if typed else ""
    try:
        rep = run_upgrade(slug, version, out, dry_run, not no_regression_tests, command)
    except KeyboardInterrupt:
        raise CookbookError("interrupted; the recipe is unchanged", exit_code=INTERRUPTED) from None
    for f in rep.fixes:
        click.echo(f"  {f['name']:<32} {f['status']:<22} {f['evidence']}")
    for name, g in rep.gates.items():
        click.echo(f"  gate {name:<27} {g['status']:<22} {g['headline']}")
    click.echo(rep.result)
    for w in rep.written:
        click.echo(f"wrote {w}")
