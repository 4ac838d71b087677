"""`cookbook` command line.

Subcommand groups are imported lazily so that `cookbook --help` and `cookbook list`
start fast and never import torch, vllm or numpy. To add a command, add one line to USER
(what users run) or MAINT_COMMANDS (`cookbook maint ...`): name -> (module, attribute, help).
"""

from __future__ import annotations

import importlib
import json

import click

from cookbook.errors import CookbookError, error_document
from cookbook.untrusted import printable

# name -> (module, attribute, one line of help); the module is imported only when the command runs.
# Module "" is this one (the groups below).
Spec = tuple[str, str, str]

# What users run: `cookbook --help` lists these, and `maint` for the rest.
USER: dict[str, Spec] = {
    "list": ("cookbook.commands.recipes", "list_cmd", "Table of every recipe, its status and whether it runs here."),
    "show": ("cookbook.commands.recipes", "show_cmd", "The fully resolved recipe, each setting with its reason."),
    "launch": ("cookbook.commands.recipes", "launch_cmd", "The copy-paste launch block (exports + vllm serve)."),
    "lint": ("cookbook.commands.recipes", "lint_cmd", "Validate recipes; report every error with file:line:col."),
    "plan": (
        "cookbook.commands.plan",
        "plan_cmd",
        "Will it fit: weights, KV per token, the KV pool, largest context and concurrency.",
    ),
    "fetch": (
        "cookbook.commands.fetch",
        "fetch_cmd",
        "Download a recipe's checkpoint (plan and disk checked first), then run its convert steps.",
    ),
    "serve": ("cookbook.commands.serve", "serve_cmd", "Run a recipe here: fetch, convert, launch, gates, stop."),
    "image": (
        "cookbook.commands.image",
        "image_cmd",
        "Build a recipe's serving image (Docker SDK), or print its plan with --dry-run.",
    ),
    "gates": ("", "GATES", "Run a recipe's gates against a live server; verify from the evidence."),
    "convert": (
        "cookbook.commands.convert",
        "convert",
        "Checkpoint converters: GGUF inspect/join/set/split/to-hf, Quark MXFP4 fuse.",
    ),
    "maint": ("", "MAINT", "For those who maintain recipes: upgrade, bisect, fixes, docs, schema, data, ..."),
}
# What those who maintain the recipes, the fix pack and the docs run: `cookbook maint NAME`.
MAINT_COMMANDS: dict[str, Spec] = {
    "schema": ("cookbook.commands.recipes", "schema_cmd", "Write (or --check) the generated recipe JSON Schema."),
    "upgrade": (
        "cookbook.commands.upgrade",
        "upgrade_cmd",
        "Move a recipe's engine pin: scratch engine, each fix's status, gates, report, new pin.",
    ),
    "docs": (
        "cookbook.commands.docs",
        "docs_cmd",
        "Generate (or --check) docs/: recipe pages, matrix, comparisons, errors, rules.",
    ),
    "gates": ("", "MAINT_GATES", "Set a recipe's bars from a calibration run; compact a bundle's transcripts."),
    "buckets": (
        "cookbook.commands.buckets",
        "buckets_cmd",
        "Gaudi warm-up bucket files: generate from a geometry (--check), validate.",
    ),
    "offline": (
        "cookbook.commands.offline",
        "offline",
        "Move a GPU recipe to a host with no registry: pack pieces here, receive there.",
    ),
    "fixes": ("cookbook.commands.fixes", "fixes_group", "Apply, check or revert the fix pack on an installed vLLM."),
    "bisect": (
        "cookbook.commands.bisect",
        "bisect_cmd",
        "The first engine release between two pins where a gate fails (binary search, a bundle a step).",
    ),
    "engine-check": (
        "cookbook.commands.engine_check",
        "engine_check",
        "The engine-checked status: the launch block served on its GPU kind, KV against the plan.",
    ),
    "data": (
        "cookbook.commands.data",
        "data_group",
        "Gate data: fetch GSM8K into the data folder; show what is there and built in.",
    ),
}
GATES_COMMANDS: dict[str, Spec] = {
    "run": ("cookbook.commands.gates", "run_cmd", "Run RECIPE's declared gates against a server; write a bundle."),
    "verify": (
        "cookbook.commands.gates",
        "verify_cmd",
        "Write RECIPE's verified block from BUNDLE if every gate passes.",
    ),
}
MAINT_GATES_COMMANDS: dict[str, Spec] = {
    "calibrate": ("cookbook.commands.gates", "calibrate_cmd", "Set RECIPE's bars from a calibration run's BUNDLE."),
    "compact": ("cookbook.commands.gates", "compact_cmd", "gzip BUNDLE's transcripts and rewrite its manifest."),
}
# The old spellings, kept for one release (each run names the new one on stderr): old words -> new.
MOVED: dict[tuple[str, ...], tuple[str, ...]] = {
    **{(name,): ("maint", name) for name in MAINT_COMMANDS if name != "gates"},
    ("gates", "calibrate"): ("maint", "gates", "calibrate"),
    ("gates", "compact"): ("maint", "gates", "compact"),
}


class LazyGroup(click.Group):
    """A group whose commands are imported only when one runs (`table`), and whose old spellings
    (MOVED, under this group's `path`) still run, with a note on stderr naming the new one."""

    def __init__(self, *args, table: dict[str, Spec], path: tuple[str, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.table, self.path = table, path
        self.moved = {old[-1]: new for old, new in MOVED.items() if old[:-1] == path}

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.table))

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            return cmd
        if name in self.table:
            module, attr, _ = self.table[name]
            return globals()[attr] if not module else getattr(importlib.import_module(module), attr)
        if name in self.moved:
            return _command(self.moved[name])
        return None

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        if name in self.moved:
            old, new = " ".join(("cookbook", *self.path, name)), " ".join(("cookbook", *self.moved[name]))
            click.echo(f"note: `{old}` is now `{new}`; the old spelling goes in the next release", err=True)
        return name, cmd, rest

    def format_commands(self, ctx, formatter):
        # Help text comes from the table so --help imports nothing.
        with formatter.section("Commands"):
            names = self.table if not self.path else sorted(self.table)  # the top level in the order of use
            formatter.write_dl([(name, self.table[name][2]) for name in names])


def _command(words: tuple[str, ...]) -> click.Command:
    """The command that `cookbook WORDS...` names."""
    cmd: click.Command = main
    for word in words:
        cmd = cmd.get_command(None, word)
    return cmd


class MainGroup(LazyGroup):
    def parse_args(self, ctx, args):
        ctx.meta["cookbook.argv"] = list(args)  # what the subcommand got: --json_command reads it
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        """Every command's last line of defence: an OSError or a RecursionError (deeply nested JSON)
        that no command turned into its own message still becomes one `error:` line, never a traceback.
        A command run with --json that fails also prints the JSON error object on stdout."""
        try:
            return self._invoke(ctx)
        except click.ClickException as e:
            command = self.json_command(ctx)
            if command is not None:
                click.echo(json.dumps(error_document(e, command), indent=2))
            raise

    def json_command(self, ctx) -> str | None:
        """`cookbook SUB ...` when the subcommand run has a --json option and was given it; else None."""
        argv = ctx.meta.get("cookbook.argv", [])
        argv = argv[: argv.index("--")] if "--" in argv else argv
        cmd, path, rest = self, [ctx.info_name or "cookbook"], list(argv)
        while isinstance(cmd, click.Group) and rest:
            name = rest.pop(0)
            if name.startswith("-"):
                continue
            try:
                cmd = cmd.get_command(ctx, name)
            except Exception:  # an unknown or broken subcommand: no JSON to promise
                return None
            if cmd is None:
                return None
            path.append(name)
        if isinstance(cmd, click.Group) or cmd is self:
            return None
        if not any("--json" in getattr(p, "opts", ()) for p in cmd.params):
            return None
        return " ".join(path) if any(a == "--json" for a in rest) else None

    def _invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except RecursionError:
            raise CookbookError(
                "the input is nested too deeply to read (thousands of levels of brackets)",
                help="give the file the command expects; no recipe, bundle or report nests like that",
            ) from None
        except OSError as e:
            if isinstance(e, BrokenPipeError):
                raise
            where = f"{printable(e.filename)}: " if e.filename else ""
            raise CookbookError(
                f"{where}{e.strerror or e}", help="check the path: it must exist, be of the right kind and be writable"
            ) from None


@click.group(cls=MainGroup, table=USER, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cookbook")
def main():
    """Recipes for serving large MoE models with vLLM on named hardware.

    \b
    Typical use:
      cookbook list                      every recipe and whether it runs here
      cookbook show glm52-2 --quant Q4_K resolved settings with their reasons
      cookbook launch glm52-2            copy-paste launch block
      cookbook lint                      validate every recipe
    """


MAINT = LazyGroup(
    "maint",
    table=MAINT_COMMANDS,
    path=("maint",),
    help="What those who maintain the recipes, the fix pack and the docs run.",
)
GATES = LazyGroup(
    "gates",
    table=GATES_COMMANDS,
    path=("gates",),
    help="Run a recipe's gates against a live server; verify a recipe from the evidence.",
)
MAINT_GATES = LazyGroup(
    "gates",
    table=MAINT_GATES_COMMANDS,
    path=("maint", "gates"),
    help="Set a recipe's bars from a calibration run; compact a bundle's transcripts.",
)


if __name__ == "__main__":  # `python -m cookbook.cli` (tools/convert/*, scripts without the console script)
    main(prog_name="cookbook")
