"""Render a resolved recipe as a launch block that pastes into bash as printed.

Exports first (one per line, in recipe order), then the fix-pack check when the recipe
asks for it, then each image.kernels entry built from this repository (its build step and the
export that switches it on), then the server command with one flag per line. Mapping- and list-valued
flags become JSON in single quotes.

Every token goes through cookbook.recipe.shell: plain variable references stay bare, all
else is quoted, and a control character anywhere is refused (R022) rather than printed.
Names (env, flags, quants, fixes) are checked by the schema before they get here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from cookbook import kernel_catalogue
from cookbook.recipe import errors as E
from cookbook.recipe import shell
from cookbook.recipe.resolve import ResolvedRecipe

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


@dataclass(frozen=True)
class Planned:
    """What the memory plan adds to a block: its flags, and the figures they come from (one
    comment line each). Built by cookbook.plan.launch_block, the one renderer every caller uses;
    this package cannot import the planner, so the plan is handed in."""

    flags: dict[str, Any] = field(default_factory=dict)
    figures: tuple[str, ...] = ()
    command: str = ""  # the `cookbook plan ...` command that prints the same figures


NO_PLAN = Planned()


def flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def _quote(text: str) -> str:
    """Quote for bash, leaving plain $VAR / ${VAR} / ${VAR:-default} references bare."""
    return shell.quote(text)


def _unsafe(resolved: ResolvedRecipe, key: str, exc: shell.UnsafeText) -> E.RecipeError:
    file, line, col = resolved.where(key)
    return E.RecipeError(
        [E.Diagnostic(E.SHELL_CONTROL_CHAR, key, f"the value {exc}", shell.CONTROL_HELP, file, line, col)]
    )


def flag_tokens(key: str, value: Any) -> list[str]:
    """argv tokens of one flag (unquoted), or [] for a null value."""
    if value is None:
        return []
    if value is True:
        return [flag_name(key)]
    if value is False:
        return ["--no-" + key.replace("_", "-")]
    if isinstance(value, (dict, list)):
        return [flag_name(key), json.dumps(value)]
    return [flag_name(key), str(value)]


def env_items(resolved: ResolvedRecipe) -> list[tuple[str, str]]:
    out = []
    for name, setting in resolved.recipe.env.items():
        value = setting.value
        if value is None:
            continue
        if isinstance(value, bool):
            value = "1" if value else "0"
        out.append((name, str(value)))
    return out


def server_argv(resolved: ResolvedRecipe, planned: Planned, model: str | None = None) -> list[str]:
    """The server command as argv (no shell). `model` replaces the recipe's model path;
    `planned` adds the memory plan's flags (cookbook.plan.launch_block.planned)."""
    serve = resolved.recipe.serve
    model = model or serve.model
    if serve.command == "vllm-serve":
        argv = ["vllm", "serve", model]
    else:
        argv = [serve.python, "-m", API_SERVER_MODULE, "--model", model]
    for key, setting in serve.args.items():
        argv += flag_tokens(key, setting.value)
    return argv + planned_tokens(planned)


def planned_tokens(planned: Planned) -> list[str]:
    out: list[str] = []
    for key, value in planned.flags.items():
        out += flag_tokens(key, value)
    return out


def fix_apply_command(resolved: ResolvedRecipe) -> str | None:
    """The command that applies the recipe's fix profile (and its opt-ins) to the installed engine."""
    fixes = resolved.recipe.image.fixes
    if not fixes.profile:
        return None
    return f"cookbook maint fixes apply --profile {fixes.profile}" + "".join(
        f" --opt-in {f.name}" for f in fixes.opt_in
    )


def fixes_line(resolved: ResolvedRecipe) -> str | None:
    """Every recipe with a fix profile: the check that the engine this block is about to run holds the
    profile's fixes (the vllm that python3 imports, or serve.python's for an api-server recipe: the
    pack's apply_all.py checks the vllm of the interpreter that runs it). On an unfixed engine, or
    another version, the block stops before the server, printing the command that applies them."""
    r = resolved.recipe
    fixes = r.image.fixes
    if not fixes.profile:
        return None
    try:
        script = shell.quote_word(fixes.launch_script)
        python = shell.quote_arg(r.serve.python) if r.serve.command == "api-server" else "python3"
    except shell.UnsafeText as exc:
        raise _unsafe(resolved, "image.fixes.launch_script", exc) from None
    opt = " ".join(_quote(f.name) for f in fixes.opt_in)
    hint = f"this engine lacks the fixes of the recipe: apply them ({fix_apply_command(resolved)}), or run the recipe image"
    line = (
        f"{python} {script} --check --profile {_quote(fixes.profile)}"
        + (f" \\\n    {opt}" if opt else "")
        + f' \\\n  || {{ echo "{hint}" >&2; exit 1; }}'
    )
    plain = re.fullmatch(r'"?\$COOKBOOK/([A-Za-z0-9_./-]+)"?', fixes.launch_script.strip())
    if plain is None or "COOKBOOK" in r.env:  # a path of the recipe's own: as written
        return line
    # The image sets COOKBOOK; outside it, the checkout the block is run from (as the CPU block's
    # COOKBOOK=${COOKBOOK:-$PWD}), and a block run elsewhere says how to point at it.
    found, name = f'"${{COOKBOOK:=$PWD}}/{plain.group(1)}"', plain.group(1)
    hint = f"no {name} under COOKBOOK=$COOKBOOK: run this in the recipe's image, or export COOKBOOK=<your cookbook checkout>"
    guard = f'[ -f {found} ] || {{ echo "{hint}" >&2; exit 1; }}'
    return guard + "\n" + line


def kernel_lines(resolved: ResolvedRecipe) -> list[str]:
    """Per image.kernels entry built from this repository: its build step and its switch (kernel_catalogue)."""
    out = []
    for ref in resolved.recipe.image.kernels:
        kernel = kernel_catalogue.KERNELS.get(ref.name)
        backend = kernel.backend_for(resolved.recipe.hardware.platform) if kernel else None
        if backend is not None and ref.variant in kernel.variants:  # lint reports the others (R017)
            out += kernel.launch_lines(ref.variant, backend)
    return out


def export_lines(resolved: ResolvedRecipe) -> list[str]:
    """`export NAME=value` per env setting, as the launch block has them (and `serve` runs)."""
    out = []
    for name, value in env_items(resolved):
        try:
            out.append(f"export {name}={_quote(value)}")
        except shell.UnsafeText as exc:
            raise _unsafe(resolved, f"env.{name}", exc) from None
    return out


def _check_rendered(resolved: ResolvedRecipe) -> None:
    """Refuse a control character in any text the block renders (the schema refuses it in
    recipe files; this holds for anything that reaches render() another way)."""
    r = resolved.recipe
    texts = [("summary", r.summary), ("serve.model", r.serve.model), ("serve.python", r.serve.python)]
    texts += [(f"serve.args.{k}", s.value) for k, s in r.serve.args.items() if isinstance(s.value, str)]
    texts += [(f"serve.args.{k}", k) for k in r.serve.args]
    texts += [(f"env.{k}", k) for k in r.env]
    if resolved.quant:
        texts.append((f"quants.{resolved.quant}", resolved.quant))
    for key, text in texts:
        try:
            shell.check(text)
        except shell.UnsafeText as exc:
            raise _unsafe(resolved, key, exc) from None


def prelude(resolved: ResolvedRecipe, planned: Planned, comments: bool = True, title: str | None = None) -> list[str]:
    """The block's lines before the server command: its header comments, the exports and the
    fix-pack check. `title` replaces the `cookbook launch` command the header names."""
    lines: list[str] = []
    r = resolved.recipe
    _check_rendered(resolved)
    if comments:
        quant = f" --quant {resolved.quant}" if resolved.quant else ""
        lines.append(f"# {r.name}{quant}: {r.summary}")
        lines.append(
            f"# generated by `{title or f'cookbook launch {r.name}{quant}'}`; recipe {resolved.content_hash[:19]}"
        )
    lines += export_lines(resolved)
    fix = fixes_line(resolved)
    if fix:
        if comments:
            lines.append("")
            opt = " and this recipe's opt-in fixes" if r.image.fixes.opt_in else ""
            lines.append(f"# Fixes: the engine must hold the {r.image.fixes.profile} profile{opt};")
            lines.append("# on one without them the block stops here, naming the command that applies them.")
        lines.append(fix)
    kernels = kernel_lines(resolved)
    if kernels:
        if comments:
            lines.append("")
            names = ", ".join(f"{k.name} {k.variant}" for k in r.image.kernels)
            lines.append(f"# Kernels ({names}): the build step checks the tuned table; the export switches it on.")
        lines += kernels
    if lines and comments:
        lines.append("")
    if planned.flags and comments:
        flags = ", ".join(flag_name(k) for k in planned.flags)
        lines.append(f"# {flags}: from the memory plan (`{planned.command}`), per GPU:")
        lines += [f"#   {f}" for f in planned.figures]
    return lines


def command_text(resolved: ResolvedRecipe, argv: list[str]) -> str:
    """The server command, its head on the first line and one flag (with its value) per line."""
    head_len = 3 if argv[:2] == ["vllm", "serve"] else 5
    try:
        # Command arguments: references double-quoted (an empty one stays an argument); the
        # exports above are assignments, which bash neither splits nor globs.
        head = " ".join(shell.quote_arg(t) for t in argv[:head_len])
    except shell.UnsafeText as exc:
        raise _unsafe(resolved, "serve.model", exc) from None
    body: list[str] = []
    i = head_len
    while i < len(argv):
        tok = argv[i]
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            body.append(f"{shell.quote_arg(tok)} {shell.quote_arg(argv[i + 1])}")
            i += 2
        else:
            body.append(shell.quote_arg(tok))
            i += 1
    cmd = [head] + [f"  {b}" for b in body]
    return " \\\n".join(cmd)


def render(resolved: ResolvedRecipe, planned: Planned, comments: bool = True) -> str:
    """The single-node block. Callers use cookbook.plan.launch_block.launch_block, which hands
    in the plan's flags, so `launch`, the docs, the image and `serve` render the same text."""
    lines = prelude(resolved, planned, comments)
    lines.append(command_text(resolved, server_argv(resolved, planned)))
    return "\n".join(lines) + "\n"
