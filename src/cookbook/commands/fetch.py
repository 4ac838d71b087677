"""`cookbook fetch`: download a recipe's checkpoint, the plan and the disk checked first,
then run the recipe's convert steps (the runner `cookbook serve` uses)."""

from __future__ import annotations

from pathlib import Path

import click

from cookbook.commands.recipes import quant_option, resolve_or_refuse, set_option
from cookbook.errors import BAD_INPUT, INTERRUPTED, CookbookError

GIB = 2**30


def _local_dir(resolved, local_dir: Path | None, env: dict) -> Path:
    if local_dir is not None:
        return local_dir
    base = Path(env["MODELS"]) if env.get("MODELS") else Path(".cache") / "models"
    return base / resolved.recipe.model.source.repo.rsplit("/", 1)[-1]


@click.command("fetch")
@click.argument("slug")
@quant_option
@set_option
@click.option("--dry-run", is_flag=True, help="List the files, their sizes and the convert steps; download nothing.")
@click.option(
    "--local-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the files go (default: $MODELS/<repo name> when the recipe exports MODELS, else .cache/models/<repo name>).",
)
@click.option("--no-convert", is_flag=True, help="Download only; skip the recipe's convert steps.")
def fetch_cmd(slug, quant, sets, dry_run, local_dir, no_convert):
    """Download the recipe's checkpoint from the Hugging Face Hub with its include patterns.

    \b
    Before the first byte: the plan (`cookbook plan`) is printed, and a configuration that
    does not fit is refused; the listed sizes are checked against the free disk. Then
    huggingface_hub downloads (resuming partial files, progress bars; HF_TOKEN for gated
    repositories, HF_ENDPOINT for a mirror), every file's checksum is verified (a mismatch is
    deleted and refused), and the recipe's convert steps run (shard join, header fixes, repack).
      cookbook fetch glm52-2 --dry-run
      cookbook fetch glm52-4 --quant Q4_K --local-dir /data/models/GLM-5.2-Vision-GGUF
    """
    from cookbook.plan.budget import make_plan
    from cookbook.plan.render import as_text
    from cookbook.serving import fetch as F
    from cookbook.serving import local

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
        for d in dls:
            F.list_files(d)
        click.echo(f"files into {target}:")
        for d in dls:
            click.echo(f"  {d.repo} @ {d.commit[:12]} ({d.why}; {', '.join(d.patterns)}):")
            for f in d.files:
                click.echo(f"    {f.size / GIB:10,.2f} GiB  {f.path}")
        total = sum(d.size for d in dls)
        need = F.check_disk(dls, target)
        free, where = F.free_bytes(target)
        click.echo(
            f"  total {total / GIB:,.2f} GiB, {need / GIB:,.2f} GiB still to download; {free / GIB:,.2f} GiB free on {where}"
        )
        if resolved.recipe.convert:
            click.echo("then the convert steps:")
            for i, c in enumerate(resolved.recipe.convert, 1):
                click.echo(
                    f"  {i}. {c.tool} {' '.join(c.args)}"
                    + (f"  (skipped when {c.creates} exists)" if c.creates else "")
                )
        if dry_run:
            return
        for d in dls:
            local.step(f"fetch {d.repo} ({d.size / GIB:,.2f} GiB)")
            F.download(d, target)
            local.note(f"{F.verify(d, target)} file(s) checked against the Hub's checksums")
        if resolved.recipe.convert and not no_convert:
            converted = dict(env)
            converted["SOURCE_DIR"] = str(target)
            files = [target / f.path for d in dls[:1] for f in d.files]
            if len(files) == 1:
                converted["SOURCE_FILE"] = str(files[0])
            local.run_convert_steps(resolved, converted, expand_globs=True)
        local.step(f"fetched {slug} into {target}")
    except KeyboardInterrupt:
        raise CookbookError("interrupted; run the same command again to resume", exit_code=INTERRUPTED) from None
