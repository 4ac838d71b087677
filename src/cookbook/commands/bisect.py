"""`cookbook maint bisect SLUG --good V1 --bad V2 --gate NAME`: the first engine release where a gate fails."""

from __future__ import annotations

import shlex
from datetime import datetime, timezone
from pathlib import Path

import click

from cookbook.cli_options import resolve_or_refuse
from cookbook.errors import INTERRUPTED, CookbookError
from cookbook.files import repo_root
from cookbook.untrusted import printable


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _step_line(n: int, step) -> str:
    text = step.figure if step.verdict == "pass" else (step.reason or step.figure)
    return f"step {n:>2}  {step.version:<12} {step.role:<8} {step.verdict:<4}  {step.seconds:>7.1f} s  {printable(text)[:300]}"


def _probe(slug: str, gate: str, out: Path, fixes: str, recorded: Path | None, echo):
    """version -> Outcome: from the bundle recorded for it under `recorded`, else a step served here."""
    if recorded:
        from cookbook.bisect.probe import outcome_from_bundle
        from cookbook.bisect.search import Outcome

        def probe(version):
            bundle = recorded / version
            if not bundle.is_dir():
                return Outcome("skip", reason=f"no recorded bundle {bundle}")
            return outcome_from_bundle(bundle, gate)

        return probe
    from cookbook.bisect.probe import EngineProbe

    return EngineProbe(slug, gate, out, repo_root() / ".cache", fixes, echo=echo)


@click.command("bisect")
@click.argument("slug")
@click.option("--good", required=True, metavar="V1", help="A release of the recipe's engine where the gate passes.")
@click.option("--bad", required=True, metavar="V2", help="A later release where it fails.")
@click.option("--gate", required=True, metavar="NAME", help="The one gate each step runs (a gate the recipe declares).")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Report and step bundles: DIR/report.{md,json}, DIR/<version>/ (default runs/bisect-<slug>-<gate>-<time>).",
)
@click.option(
    "--fixes",
    default="carried",
    show_default=True,
    metavar="carried|none|PROFILE",
    help="What each step's engine is patched with: carried = the pack's profile for that release where there is "
    "one (fixes/profiles/<dist>-<version>.yaml), else the recipe's profile carried to it (its fixes that apply "
    "exactly, and those whose lines only moved, refreshed); none = the release as published; or one named "
    "profile as it is (it fits its own pin).",
)
@click.option(
    "--from-bundles",
    "recorded",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Decide each step from bundles recorded earlier, DIR/<version>/ (a version without one is a skip), "
    "instead of installing and serving.",
)
def bisect_cmd(slug, good, bad, gate, out, fixes, recorded):
    """Find the first release of the recipe's engine distribution, between --good and --bad,
    where --gate fails: a binary search over the registry's releases, one gate run a step.

    The releases come from PyPI's JSON API (COOKBOOK_PYPI_URL for another index), both ends
    included, in PEP 440 order; pre-releases, yanked releases and releases with no files
    between the ends are left out, and the report says which.

    Like `git bisect`, the ends are checked first: --good must pass and --bad fail, or the
    search stops (exit 1). A release whose engine does not install, or whose server does not
    start, is skipped; when skips hide the answer the report gives the range.

    Each step installs the release in a scratch venv, applies the recipe's fixes that still
    apply to it (--fixes), serves the recipe from it, runs the gate and keeps its bundle in
    DIR/<version>/; a line per step says version, verdict, headline figure and time.
    DIR/report.md and report.json are rewritten after every step; Ctrl-C leaves the finished
    steps and a partial report (exit 130).

    \b
      cookbook maint bisect gemma3-270m-cpu --good 0.31.0 --bad 0.32.0 --gate greedy
      cookbook maint bisect gemma3-270m-cpu --good 0.30.0 --bad 0.32.0 --gate tools --from-bundles runs/old

    Exit: 0 an answer (the first bad release, or a range), 1 the ends do not hold or the
    index cannot be read, 2 a refused request, 130 interrupted.
    """
    from cookbook.bisect.releases import releases_between
    from cookbook.bisect.report import Report
    from cookbook.bisect.search import Bisection, EndsDoNotHold
    from cookbook.files import out_dir_problem

    resolved = resolve_or_refuse(slug, None, (), f"cannot bisect {slug}")
    declared = resolved.recipe.gates.declared()
    if gate not in declared:
        raise CookbookError(
            f"{slug} declares no gate {printable(gate)!r}",
            help=f"pick one of its gates: {', '.join(declared) or 'it declares none'}",
        )
    if fixes not in ("carried", "none") and not recorded:
        from cookbook.fixes.pack import known_profiles

        if fixes not in known_profiles():
            raise CookbookError(
                f"--fixes {printable(fixes)!r} is neither carried, none nor a fix profile",
                help=f"profiles: {', '.join(known_profiles())}",
            )
    dist = resolved.recipe.image.engine.package
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = out or repo_root() / "runs" / f"bisect-{slug}-{gate}-{stamp}"
    if why := out_dir_problem(out):
        raise CookbookError(f"--out {printable(out)}: {why}", help="give a new --out folder")
    if (out / "report.json").exists():
        raise CookbookError(f"{out} already holds a bisect report", help="give a new --out folder")
    releases = releases_between(dist, good, bad)
    echo = click.echo
    echo(f"{dist} releases from {releases.index}, {releases.versions[0]} .. {releases.versions[-1]}:")
    echo(f"  searched ({len(releases.versions)}): {', '.join(releases.versions)}")
    if releases.excluded:
        echo("  left out: " + ", ".join(f"{v} ({why})" for v, why in releases.excluded))

    probe = _probe(slug, gate, out, fixes, recorded, echo)
    argv = ["cookbook", "maint", "bisect", slug, "--good", good, "--bad", bad, "--gate", gate, "--out", str(out)]
    argv += ["--fixes", fixes] if fixes != "carried" else []
    argv += ["--from-bundles", str(recorded)] if recorded else []
    report = Report(slug, gate, releases, shlex.join(argv), _now())

    def on_step(step):
        echo(_step_line(len(report.steps), step))
        report.write(out)

    search = Bisection(releases.versions, probe, steps=report.steps, on_step=on_step, slug=slug)
    report.write(out)
    try:
        report.answer = search.run()
        report.state = "complete"
    except EndsDoNotHold as e:
        report.state, report.note = "ends do not hold", e.format_message()
        raise
    except CookbookError as e:  # a step could not say anything about its release (e.g. the port was taken)
        report.state, report.note = "stopped", e.format_message()
        raise
    except KeyboardInterrupt:
        report.state, report.note = "interrupted", f"after {len(report.steps)} finished steps"
        raise CookbookError(
            f"interrupted; the finished steps' bundles and a partial report are in {out}", exit_code=INTERRUPTED
        ) from None
    finally:
        report.finished = _now()
        report.write(out)
    echo(report.headline())
    echo(f"report: {out / 'report.md'} (and report.json)")
