"""`cookbook image`: build a recipe's serving image, or print its plan (--dry-run)."""

from __future__ import annotations

import json

import click

from cookbook.cli_options import quant_option, resolve_or_refuse


def run_line(p) -> str:
    from cookbook.image.run import run_command

    return run_command(p.resolved, p.tag)


def dry_run_text(p, context_dir: str, quant: str | None = None) -> str:
    from cookbook.untrusted import printable

    chosen = f" --quant {quant}" if quant else ""
    lines = [
        f"# cookbook image {p.slug}{chosen} --dry-run: nothing is built",
        f"# image {p.tag}",
        f"# base {p.base or '(none)'}",
    ]
    lines += [f"# missing build input: {i.name} -> {i.put}" for i in p.missing_inputs]
    if p.missing_wheels is not None:
        lines.append(f"# missing: {p.missing_wheels.format_message()}")
    lines += ["", "## Dockerfile", *p.dockerfile.rstrip("\n").split("\n"), "", "## context"]
    lines += [k for k in sorted(p.files) if not k.startswith("wheels/")]
    if p.port.wheels:
        lines.append("wheels/*.whl (the host's wheel set, .cache/wheels; scripts/fetch-wheels fills it)")
    lines += ["", "## build", p.build_command(context_dir)]
    lines += ["", "## run (the model folder mounted, the recipe's port, the platform's accelerators)"]
    lines += run_line(p).split("\n")
    lines += ["", "## launch.sh (the image runs it; `cookbook launch` prints the same)"]
    lines += p.files["launch.sh"].rstrip("\n").split("\n")
    return "".join(printable(line) + "\n" for line in lines)


def dry_run_json(p, context_dir: str) -> dict:
    return {
        "recipe": p.slug,
        "quant": p.resolved.quant,
        "tag": p.tag,
        "base": p.base,
        "missing_inputs": [{"name": i.name, "put": i.put} for i in p.missing_inputs],
        "missing_wheels": p.missing_wheels.format_message() if p.missing_wheels is not None else None,
        "dockerfile": p.dockerfile,
        "context": sorted(k for k in p.files if not k.startswith("wheels/")),
        "build": p.build_command(context_dir),
        "run": run_line(p),
        "launch_sh": p.files["launch.sh"],
    }


@click.command("image")
@click.argument("slug")
@quant_option
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the Dockerfile, the context's files, the build command and the run line; no daemon.",
)
@click.option("--base", help="Base image to build on (default: the recipe's, else docker/<platform>/base.yaml).")
@click.option("--tag", help="Image reference to tag (default cookbook/<slug>:<recipe-hash12>).")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: one JSON document (for scripts).")
def image_cmd(slug, quant, dry_run, base, tag, as_json):
    """Build the serving image of a recipe: its port's Dockerfile on the platform's base, with the
    fix pack, kernels and resolved recipe; tagged cookbook/<slug>:<recipe-hash12>, labelled with
    source, revision, recipe hash, fix-set hash and engine pin. Its last step runs
    `cookbook maint fixes check`.

    \b
      cookbook image gemma3-270m-cpu --dry-run
      cookbook image gemma3-270m-cpu          # needs dockerd and the base (scripts/make-cpu-base)
    """
    from cookbook.files import repo_root
    from cookbook.image import build, context

    if as_json and not dry_run:
        from cookbook.errors import CookbookError

        raise CookbookError("--json goes with --dry-run", help="add --dry-run, or drop --json")
    resolved = resolve_or_refuse(slug, quant, (), f"cannot build the image of {slug}")
    p = context.plan(resolved, base=base, tag=tag)
    context_dir = repo_root() / ".cache" / "image" / (slug + (f"-{quant}" if quant else "")) / "context"
    if dry_run:
        rel = context_dir.relative_to(repo_root()).as_posix()
        click.echo(json.dumps(dry_run_json(p, rel), indent=2) if as_json else dry_run_text(p, rel, quant), nl=as_json)
        return
    if p.missing_wheels is not None:
        raise p.missing_wheels
    build.require_named_base(p)
    c = build.client()
    build.require_base(c, p)
    context.write(p, context_dir)
    result = build.build(c, p, context_dir)
    click.echo(f"{result['tag']} {result['id']}")
