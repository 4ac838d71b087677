"""`cookbook fetch`: download a recipe's checkpoint, the plan and the disk checked first,
then run the recipe's convert steps (the runner `cookbook serve` uses)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click

from cookbook.cli_options import quant_option, resolve_or_refuse, set_option
from cookbook.errors import BAD_INPUT, INTERRUPTED, CookbookError
from cookbook.units import gib


def _local_dir(resolved, local_dir: Path | None, env: dict) -> Path:
    from cookbook.serving.fetch import download_folder

    return download_folder(resolved, env, local_dir)


def _convert_rows(resolved) -> list[dict]:
    return [{"tool": c.tool, "args": list(c.args), "creates": c.creates} for c in resolved.recipe.convert]


def _dry_run_json(resolved, plan, dls, target, listed_error, need, free, served) -> dict:
    from cookbook import model_folder
    from cookbook.plan.render import as_json

    return {
        "recipe": resolved.slug,
        "quant": resolved.quant,
        "local_dir": str(target),
        "model_folder": str(served) if served is not None else None,
        "refused": model_folder.problem(target),
        "downloads": [
            {
                "repo": d.repo,
                "revision": d.revision,
                "why": d.why,
                "include": d.patterns,
                "recipe_size_gib": d.size_gib,
                "commit": d.commit,
                "files": [{"path": f.path, "bytes": f.size} for f in d.files] if d.commit else None,
            }
            for d in dls
        ],
        "file_list": None if listed_error is None else f"needs the Hub: {listed_error}",
        "still_to_download_bytes": need,
        "free_bytes": free,
        "convert": _convert_rows(resolved),
        "plan": as_json(plan),
    }


@click.command("fetch")
@click.argument("slug")
@quant_option
@set_option
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what the recipe fetches (repository, patterns, sizes) and the convert steps; with the Hub "
    "reachable, the files and the disk check too. Downloads nothing.",
)
@click.option(
    "--local-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the files go (default: $MODELS/<repo name> when the recipe exports MODELS, else .cache/models/<repo name>).",
)
@click.option("--no-convert", is_flag=True, help="Download only; skip the recipe's convert steps.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: one JSON document (for scripts).")
def fetch_cmd(slug, quant, sets, dry_run, local_dir, no_convert, as_json):
    """Download the recipe's checkpoint from the Hugging Face Hub with its include patterns.

    \b
    Before the first byte: the plan (`cookbook plan`) is printed, and a configuration that
    does not fit is refused; the listed sizes are checked against the free disk. Then
    huggingface_hub downloads (resuming partial files, progress bars; HF_TOKEN for gated
    repositories, HF_ENDPOINT for a mirror), every file's checksum is verified (a mismatch is
    deleted and refused), and the recipe's convert steps run (shard join, header fixes, repack)
    on the folder it downloaded into ($SOURCE_DIR; $SOURCE_FILE when that is one file).
      cookbook fetch glm52-2 --dry-run            # without a network: what the recipe knows
      cookbook fetch glm52-4 --quant Q4_K --local-dir /data/models/GLM-5.2-Vision-GGUF
    """
    from cookbook.plan.budget import make_plan
    from cookbook.plan.render import as_text
    from cookbook.serving import fetch as F
    from cookbook.serving import local

    if as_json and not dry_run:
        raise CookbookError("--json goes with --dry-run", help="add --dry-run, or drop --json")
    try:
        import huggingface_hub  # noqa: F401
    except ImportError as e:
        raise CookbookError(
            f"cookbook fetch needs huggingface_hub ({e})",
            help="pip install -e '.[data]'",
            exit_code=BAD_INPUT,
        ) from None
    resolved = resolve_or_refuse(slug, quant, sets, f"cannot fetch {slug}")
    dls = F.downloads(resolved)
    plan = make_plan(resolved)
    if not as_json:
        click.echo(as_text(plan))
    if not plan.fits:
        raise CookbookError(
            f"{slug}" + (f" --quant {plan.quant}" if plan.quant else "") + " does not fit: " + "; ".join(plan.refusals),
            help="nothing was downloaded; `cookbook plan` shows the numbers",
            exit_code=BAD_INPUT,
        )
    try:
        env = local.exported_env(resolved, local.shell_env(None))
        target = _local_dir(resolved, local_dir, env)
        listed_error = None
        try:
            for d in dls:
                F.list_files(d)
        except CookbookError as e:
            if not dry_run:
                raise
            listed_error = e.message  # a dry run without the Hub still says what the recipe knows
        need = free = None
        if listed_error is None:
            need = F.check_disk(dls, target) if not dry_run else sum(F.still_needed(d, target) for d in dls)
            free = F.free_bytes(target)[0]
        served = F.served_folder(resolved, env)
        if as_json:
            click.echo(
                json.dumps(_dry_run_json(resolved, plan, dls, target, listed_error, need, free, served), indent=2)
            )
            return
        _print_listing(resolved, dls, target, served, listed_error, need, free)
        if dry_run:
            return
        _download(slug, resolved, dls, target, env, served, no_convert)
    except KeyboardInterrupt:
        raise CookbookError("interrupted; run the same command again to resume", exit_code=INTERRUPTED) from None


def _print_listing(resolved, dls, target: Path, served, listed_error, need, free) -> None:
    """What fetch writes where: the folder, each download's files and sizes, the disk, the convert steps."""
    from cookbook import model_folder
    from cookbook.serving import fetch as F
    from cookbook.untrusted import printable

    click.echo(
        f"files into {printable(str(target))}"
        + (" (the model folder, $CHECKPOINT_DIR: launch and serve read it)" if served == target else "")
        + ":"
    )
    if (refused := model_folder.problem(target)) is not None:
        click.echo(f"  refused: {printable(str(target))} {refused}; the cookbook writes only into a folder it created")
    for d in dls:
        size = f"; {d.size_gib:,.2f} GiB by the recipe" if d.size_gib else ""
        rev = f" @ {d.commit[:12]}" if d.commit else (f" @ {d.revision}" if d.revision else "")
        click.echo(f"  {d.repo}{rev} ({d.why}; {', '.join(d.patterns)}{size}):")
        for f in d.files:
            click.echo(f"    {gib(f.size, 10)}  {f.path}")
    if listed_error is not None:
        click.echo(f"  the file list needs the Hub: {listed_error}")
    else:
        total = sum(d.size for d in dls)
        free_at = F.free_bytes(target)[1]
        click.echo(f"  total {gib(total)}, {gib(need)} still to download; {gib(free)} free on {free_at}")
    if resolved.recipe.convert:
        click.echo(f"then the convert steps ($SOURCE_DIR = {target}):")
        for i, c in enumerate(resolved.recipe.convert, 1):
            click.echo(
                f"  {i}. {c.tool} {' '.join(c.args)}" + (f"  (skipped when {c.creates} exists)" if c.creates else "")
            )


def _download(slug: str, resolved, dls, target: Path, env: dict, served, no_convert: bool) -> None:
    """Claim the folder, download and check every file, run the convert steps, say how to serve it."""
    from cookbook import model_folder
    from cookbook.serving import fetch as F
    from cookbook.serving import local

    model_folder.claim(target)  # a folder of the user's is refused before the first byte
    for d in dls:
        local.step(f"fetch {d.repo} ({gib(d.size)})")
        F.download(d, target)
        local.note(f"{F.verify(d, target)} file(s) checked against the Hub's checksums")
    if resolved.recipe.convert and not no_convert:
        local.run_convert_steps(resolved, convert_env(env, target, dls), expand_globs=True)
    local.step(f"fetched {slug} into {target}")
    if served is not None and served != target:  # --local-dir: the block serves $CHECKPOINT_DIR
        local.note(f"serve it: CHECKPOINT_DIR={shlex.quote(str(target))} cookbook launch {slug}")
    elif served is not None:
        local.note(f"serve it: cookbook launch {slug}")


def convert_env(env: dict, target: Path, dls) -> dict:
    """The convert steps' environment: the block's exports, $SOURCE_DIR the folder fetch wrote, and
    $SOURCE_FILE its one file when the model is one file. The only place these are set for a fetch."""
    out = dict(env, SOURCE_DIR=str(target))
    files = [target / f.path for d in dls[:1] for f in d.files]
    if len(files) == 1:
        out["SOURCE_FILE"] = str(files[0])
    return out
