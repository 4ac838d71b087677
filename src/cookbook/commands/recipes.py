"""Recipe commands: list, show, launch, lint, schema, errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from cookbook.cli_options import quant_option, resolve_or_refuse, set_option
from cookbook.errors import FAILED, CookbookError
from cookbook.recipe import errors as E
from cookbook.recipe import paths
from cookbook.untrusted import printable


def _platform_option(ctx, param, value):
    """--platform: a catalogue id, else one message naming the ids there are."""
    from cookbook import platforms

    if value is None or value in platforms.CATALOGUE:
        return value
    raise CookbookError(
        f"--platform {printable(value[:80])}: no such platform in the catalogue",
        help="one of: " + ", ".join(sorted(platforms.CATALOGUE)),
        location="--platform",
    )


@click.command("list")
@click.option(
    "--platform",
    callback=_platform_option,
    help="Only recipes that run on this GPU kind (e.g. h100): its own, and those of a sibling of the same "
    "architecture whose plan fits it. Judged for that platform, not this machine.",
)
@click.option(
    "--gpus",
    type=click.IntRange(0, 4096),
    help="Only recipes that need at most N GPUs (with --platform: judged on N of them).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_cmd(platform, gpus, as_json):
    """Every recipe: model, hardware, status, and whether it runs on this machine.

    \b
    With --platform (and --gpus), what runs on that hardware instead of this machine:
      cookbook list --platform h100 --gpus 8     # 8x H100: its recipes, and the H200 ones whose plan fits
    A recipe written for a sibling of the same architecture (H200 for H100) whose plan fits
    reads "plan fits": its bars and evidence are the other platform's.
    """
    from cookbook import host_cpu, platforms
    from cookbook.evidence.status import shown_status, status_of
    from cookbook.plan import elsewhere
    from cookbook.recipe.resolve import all_slugs, resolve

    here = platforms.detect()
    rows = []
    for slug in all_slugs():
        try:
            r = resolve(slug, check=False)
        except E.RecipeError as exc:
            if platform is None and gpus is None:
                rows.append(
                    {
                        "slug": slug,
                        "model": "?",
                        "hardware": "?",
                        "status": "invalid",
                        "runs_here": False,
                        "fit": elsewhere.NO,
                        "reason": exc.diagnostics[0].render(paths.repo_root()),
                    }
                )
            continue
        if r.recipe.abstract:
            continue
        hw = r.recipe.hardware
        if gpus is not None and hw.gpus > gpus:
            continue
        if platform is not None:
            if hw.platform != platform and not elsewhere.same_kind(hw.platform, platform):
                continue
            fit = elsewhere.fit_on(r, platform, gpus)
            ok, verdict, reason = fit.verdict == elsewhere.YES, fit.verdict, fit.reason
        else:
            ok, reason = platforms.can_run(hw.platform, hw.gpus, hw.min_host_memory_gib, here)
            if ok and hw.platform == "cpu" and (why := host_cpu.unmet(slug)):
                ok, reason = False, why
            verdict = elsewhere.YES if ok else elsewhere.NO
            # A sibling of this machine's GPU kind (an H200 recipe on an H100): the plan decides, not the name.
            if not ok and elsewhere.same_kind(hw.platform, here.platform) and here.devices >= hw.gpus:
                fit = elsewhere.fit_on(r, here.platform)
                verdict, reason = fit.verdict, fit.reason
        rows.append(
            {
                "slug": slug,
                "model": r.recipe.model.name,
                "hardware": f"{hw.gpus}x {hw.platform}" if hw.gpus else hw.platform,
                "status": shown_status(r, status_of(r)),
                "runs_here": ok,
                "fit": verdict,
                "reason": reason,
            }
        )
    where = here.description
    if platform is not None:
        where = f"{gpus}x {platform}" if gpus else f"{platform} (as many GPUs as each recipe needs)"
    nearest = _nearest_line(platform, gpus) if not rows and (platform or gpus is not None) else None
    if as_json:
        doc = {"machine": here.description, "recipes": rows}
        if platform is not None or gpus is not None:
            doc["judged_for"] = where
            doc["nearest"] = nearest
        click.echo(json.dumps(doc, indent=2))
        return
    if not rows:
        click.echo(f"no recipe runs on {where}" + (f"; {nearest}" if nearest else ""))
        return
    headers = ("RECIPE", "MODEL", "HARDWARE", "STATUS", "HERE" if platform is None else "THERE")
    table = [
        (
            r["slug"],
            r["model"],
            r["hardware"],
            r["status"],
            r["fit"] if r["fit"] == "yes" else f"{r['fit']}: {r['reason']}",
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(headers[:-1])]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    click.echo(fmt.format(*headers))
    for t in table:
        click.echo(fmt.format(*t))
    click.echo(f"\n{'judged for' if platform else 'this machine'}: {where}")
    if platform is None:
        click.echo("other hardware: cookbook list --platform ID [--gpus N]  (e.g. --platform h100 --gpus 8)")


def _nearest_line(platform: str | None, gpus: int | None) -> str:
    """What comes nearest when a filter matches nothing: the recipes of that GPU kind (or any) with
    the fewest GPUs above the count asked for."""
    from cookbook.plan import elsewhere
    from cookbook.recipe.resolve import all_slugs, resolve

    found = []
    for slug in all_slugs():
        try:
            r = resolve(slug, check=False)
        except E.RecipeError:
            continue
        hw = r.recipe.hardware
        if r.recipe.abstract or r.recipe.gates.benchmark_only:
            continue
        if platform is not None and hw.platform != platform and not elsewhere.same_kind(hw.platform, platform):
            continue
        found.append((hw.gpus, slug))
    if not found:
        return (
            f"no recipe is written for {platform} or its GPU kind yet: `cookbook plan SLUG --platform {platform}` "
            "plans an existing one there"
        )
    found.sort()
    return "nearest, with more GPUs: " + ", ".join(f"{slug} ({n} GPUs)" for n, slug in found[:3])


@click.command("show")
@click.argument("slug")
@quant_option
@set_option
@click.option("--json", "as_json", is_flag=True, help="The resolved recipe as JSON.")
def show_cmd(slug, quant, sets, as_json):
    """The fully resolved recipe, each setting with its reason. Loads and downloads nothing."""
    from cookbook.evidence.status import shown_status, status_of
    from cookbook.recipe.show import render_show

    resolved = resolve_or_refuse(slug, quant, sets, f"cannot show {slug}")
    if as_json:
        click.echo(
            json.dumps(
                {"quant": resolved.quant, "content_hash": resolved.content_hash, "recipe": resolved.data}, indent=2
            )
        )
        return
    from cookbook.recipe.resolve import resolve

    # The status is the recipe's as written; resolved again only when --quant/--set made another one.
    as_written = resolve(resolved.path, check=False) if quant or sets else resolved
    status = shown_status(as_written, status_of(as_written))
    if resolved.content_hash != as_written.content_hash:  # --set/--quant made a configuration never verified
        status = f"unverified (this --set/--quant configuration; the recipe as written is {status})"
    click.echo(render_show(resolved, status), nl=False)


@click.command("launch")
@click.argument("slug")
@quant_option
@set_option
@click.option("--no-comments", is_flag=True, help="Only the commands.")
@click.option("--nodes", type=int, help="Split the recipe's GPUs over this many nodes (2 or more); node 0 is the head.")
@click.option("--node-rank", type=int, help="With --nodes: print only this node's block (default: every node's).")
@click.option(
    "--runtime",
    type=click.Choice(["mp", "ray", "lws"]),
    default="mp",
    show_default=True,
    help="With --nodes: vLLM's multiprocessing runtime (--nnodes, or data-parallel flags), a Ray cluster, "
    "or a Kubernetes LeaderWorkerSet manifest.",
)
@click.option(
    "--head-addr",
    default="$HEAD_ADDR",
    show_default=True,
    help="With --nodes: the head node's address as the blocks name it (an address, or a $VARIABLE).",
)
@click.option("--image", help="With --runtime lws: the serving image (default: a placeholder to replace).")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON document: the block, the plan's flags, the recipe hash."
)
def launch_cmd(slug, quant, sets, no_comments, nodes, node_rank, runtime, head_addr, image, as_json):
    """The copy-paste launch block: exports, then the server command, one flag per line.

    With --nodes N: the blocks of an N-node launch (each node's, or --node-rank R's), or with
    --runtime lws the LeaderWorkerSet manifest."""
    from cookbook.plan.launch_block import launch_block, planned, refuse_unfit

    action = f"cannot launch {slug}" + (f" --quant {quant}" if quant else "")
    resolved = resolve_or_refuse(slug, quant, sets, action)
    note = refuse_unfit(resolved, action)
    if note:
        click.echo(note, err=True)
    if nodes is None:
        given = [f for f, v in (("--node-rank", node_rank), ("--image", image)) if v is not None]
        if given or runtime != "mp" or head_addr != "$HEAD_ADDR":
            raise CookbookError(
                f"{(given or ['--runtime/--head-addr'])[0]} needs --nodes", help="add --nodes N (2 or more)"
            )
    text = launch_block(
        resolved,
        comments=not no_comments,
        nodes=nodes,
        runtime=runtime,
        node_rank=node_rank,
        head_addr=head_addr,
        image=image,
    )
    if as_json:
        plan = planned(resolved)
        doc = {
            "recipe": resolved.slug,
            "quant": resolved.quant,
            "content_hash": resolved.content_hash,
            "sets": list(sets),
            "nodes": nodes,
            "runtime": runtime if nodes else None,
            "planned_flags": plan.flags,
            "plan_figures": list(plan.figures),
            "block": text,
        }
        click.echo(json.dumps(doc, indent=2))
        return
    click.echo(text, nl=False)


def diagnostic_json(d, root: Path) -> dict:
    return d.to_json(root)


@click.command("lint")
@click.argument("targets", nargs=-1, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON document: every diagnostic, and the counts.")
def lint_cmd(targets, as_json):
    """Validate recipes (default: all under recipes/). Reports every error in a file at once."""
    from cookbook.evidence.status import status_and_reasons
    from cookbook.recipe.lint import lint_file

    files: list[Path] = []
    for t in targets or [paths.recipes_dir()]:
        if t.is_dir():
            found = sorted(t.glob("*/recipe.yaml")) + ([t / "recipe.yaml"] if (t / "recipe.yaml").is_file() else [])
            files += found
        elif t.exists():
            files.append(t)
        else:
            raise CookbookError(
                f"{t}: no such file or directory",
                help="pass recipe.yaml files or folders holding recipes/<slug>/recipe.yaml",
            )
    errors = hints = 0
    found = []
    for f in files:
        for d in lint_file(f, status_and_reasons):
            found.append(diagnostic_json(d, paths.repo_root()))
            if not as_json:
                click.echo(d.render(paths.repo_root()))
            if d.kind.level == "error":
                errors += 1
            else:
                hints += 1
    if as_json:
        doc = {"checked": len(files), "errors": errors, "hints": hints, "diagnostics": found}
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(f"{len(files)} recipe(s) checked: {errors} error(s), {hints} hint(s)", err=True)
    sys.exit(FAILED if errors else 0)


@click.command("schema")
@click.option("--check", is_flag=True, help="Fail if the committed schema is stale.")
def schema_cmd(check):
    """Write schema/recipe.schema.json from the recipe model."""
    from cookbook.generated_files import write_or_check
    from cookbook.recipe.model import json_schema

    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    write_or_check({paths.schema_file(): text}, check=check, command="cookbook schema")
