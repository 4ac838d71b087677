"""`cookbook maint offline pack`: a GPU recipe's engine, dependencies and model as pieces for a host that
reaches no registry (cookbook.offline). On the host, `python3 scripts/offline-gpu/receive.py`
takes them in, one transfer at a time."""

from __future__ import annotations

from pathlib import Path

import click

from cookbook.cli_options import resolve_or_refuse
from cookbook.errors import CookbookError


@click.group("offline")
def offline():
    """Move a recipe to an offline GPU host: pack here, receive there.

    \b
      cookbook maint offline pack gemma3-270m-h200            # .carry/gemma3-270m-h200/piece-NN + pieces.json
      # on the host, once per transfer of one or more pieces (standard library only):
      python3 scripts/offline-gpu/receive.py .carry/gemma3-270m-h200   # into ~/.cache/cookbook-offline
      source "$(python3 scripts/offline-gpu/receive.py --installed)"   # env.sh, once verified
      cookbook maint offline lock gemma3-270m-h200            # recipes/gemma3-270m-h200/offline.lock: what pack carries
    """


@offline.command("pack")
@click.argument("slug")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Folder for the pieces (default .carry/<slug>); an earlier pack's pieces there are replaced, "
    "any other file refuses the pack unless --force.",
)
@click.option("--force", is_flag=True, help="Replace --out even when it holds files an earlier pack did not write.")
@click.option(
    "--piece-mib",
    type=int,
    help="Size of each piece, MiB (default: --transfer-mib less this checkout's size, which travels beside each piece).",
)
@click.option(
    "--transfer-mib",
    default=64,
    show_default=True,
    help="What one transfer to the host may carry, MiB (this project's H200 link: 64 a call, checkout included).",
)
def pack_cmd(slug, out, force, piece_mib, transfer_mib):
    """Resolve, download and cut SLUG's engine, missing dependencies and model into pieces.

    What the host already has and what the serve path can do without are in
    recipes/SLUG/offline.yaml; the engine pin is the recipe's image.engine.
    """
    from cookbook.files import repo_root
    from cookbook.offline import pack

    out = out or repo_root() / ".carry" / slug
    pack.check_out(out, force)  # before the checkout is measured or anything is downloaded
    if piece_mib is None:
        checkout = pack.checkout_mib(repo_root())
        piece_mib = int(transfer_mib - checkout - 1)  # 1 MiB for pieces.json and the link's own framing
        click.echo(f"pieces of {piece_mib} MiB: {transfer_mib} MiB a transfer less the {checkout:.1f} MiB checkout")
    if piece_mib < 1:
        raise CookbookError(
            f"--piece-mib {piece_mib}: must be at least 1",
            help="raise --transfer-mib or make the checkout that travels beside each piece smaller",
        )
    resolved = resolve_or_refuse(slug, None, (), f"cannot pack {slug}")
    engine = resolved.recipe.image.engine
    manifest = pack.pack(slug, f"{engine.package}=={engine.version}", out, piece_mib, force)
    n = len(manifest["pieces"])
    click.echo(
        f"{out}: {n} pieces, {manifest['size'] / 2**20:.0f} MiB in all ({manifest['engine']} and "
        f"{manifest['wheels']} wheels), payload sha256 {manifest['sha256'][:16]}"
    )
    click.echo(f"send pieces.json with each piece; run receive.py after each transfer ({n} transfers)")


@offline.command("lock")
@click.argument("slug")
@click.option(
    "--like",
    "bundle",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="A verified bundle of SLUG: pin the versions (and files, by sha256) its payload carried.",
)
def lock_cmd(slug, bundle):
    """Resolve SLUG's payload from the index's metadata and write recipes/SLUG/offline.lock.

    Every wheel `cookbook maint offline pack` would carry, the engine first, as `NAME==VERSION
    --hash=sha256:...` (pip's hash-checking mode; no path or URL of this machine). Commit it: a later
    pack reads it, resolves nothing, and pip refuses any file whose sha256 differs.
    """
    from cookbook.files import atomic_write, repo_root
    from cookbook.offline import lock, pack

    resolved = resolve_or_refuse(slug, None, (), f"cannot lock {slug}")
    engine = resolved.recipe.image.engine
    like = pack.carried_by(bundle / "environment.lock") if bundle else None
    made = pack.make_lock(slug, f"{engine.package}=={engine.version}", like)
    path = repo_root() / "recipes" / slug / lock.LOCK_NAME
    atomic_write(path, made.text(slug))
    click.echo(f"{path}: {engine.package}=={engine.version} and {len(made.wheels)} wheels, each with its sha256")
