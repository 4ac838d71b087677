"""`cookbook show`: the resolved recipe as text, every setting followed by its reason."""

from __future__ import annotations

import json
import textwrap

from cookbook import platforms
from cookbook.recipe.launch import flag_tokens
from cookbook.recipe.model import Setting
from cookbook.recipe.resolve import ResolvedRecipe
from cookbook.untrusted import printable

WIDTH = 88


def kernel_lines(k, platform: str) -> list[str]:
    """A recipe's kernel step: the build command of the platform's backend, or why there is none here."""
    from cookbook import kernel_catalogue as catalogue

    kernel = catalogue.get(k.name)
    backend = kernel.backend_for(platform) if kernel else None
    out = [f"  kernel {k.name} --variant {k.variant}" + (f" --backend {backend.id}" if backend else "")]
    if backend and backend.missing:
        out += textwrap.wrap(
            f"backend {backend.id} is not in this repository: {backend.missing}",
            WIDTH,
            initial_indent="    ",
            subsequent_indent="      ",
        )
    elif backend:
        out.append(f"    build: {kernel.build_command(k.variant, backend)}")
    out += _why(k.why, 4)
    return out


def _why(text: str | None, indent: int = 6) -> list[str]:
    if not text:
        return []
    return textwrap.wrap(f"why: {text}", WIDTH, initial_indent=" " * indent, subsequent_indent=" " * (indent + 5))


def _setting_lines(label: str, s: Setting, indent: int = 2) -> list[str]:
    lines = [" " * indent + label]
    lines += _why(s.why, indent + 4)
    if s.source:
        lines.append(" " * (indent + 4) + f"source: {s.source}")
    return lines


def fix_lines(resolved: ResolvedRecipe) -> list[str]:
    fixes = resolved.recipe.image.fixes
    if not fixes.profile:
        return []
    lines = [f"  fixes: profile {fixes.profile}, in the pack's order"]
    try:
        from cookbook.fixes import pack

        infos = pack.resolve(fixes.profile, [f.name for f in fixes.opt_in])
    except ImportError:
        infos = None
    except Exception as exc:  # FixError: show the problem, lint reports it as R014
        lines.append(f"    (cannot list: {str(exc).splitlines()[0]})")
        infos = None
    if infos is not None:
        for i, fix in enumerate(infos, 1):
            tag = " [opt-in]" if fix.opt_in else ""
            origin = "" if fix.provided_by == "pack" else f" [provided by {fix.provided_by}]"
            lines += textwrap.wrap(
                f"{i}. {fix.name}{tag}{origin}: {fix.summary}",
                WIDTH,
                initial_indent="    ",
                subsequent_indent="       ",
            )
    else:
        for f in fixes.opt_in:
            lines.append(f"    opt-in {f.name}")
    for f in fixes.provided_by_port:
        lines += textwrap.wrap(
            f"- {f.name} [in the port image]: {f.why or ''}", WIDTH, initial_indent="    ", subsequent_indent="      "
        )
    return lines


def _relative(path) -> str:
    from cookbook.recipe.paths import repo_root

    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


def render_show(resolved: ResolvedRecipe, status: str) -> str:
    """`status`: the status of the recipe as written (cookbook.evidence.status.verified_status)."""
    out = _head_lines(resolved, status)
    out += _model_lines(resolved)
    out += _hardware_lines(resolved.recipe)
    out += _image_lines(resolved)
    out += _convert_env_serve_lines(resolved.recipe)
    out += _rule_lines(resolved)
    out += _gate_and_reported_lines(resolved.recipe)
    out += _issue_and_verified_lines(resolved)
    return "\n".join(out) + "\n"


def _head_lines(resolved: ResolvedRecipe, status: str) -> list[str]:
    r = resolved.recipe
    out: list[str] = []
    out.append(f"{r.name}: {r.summary}")
    extends = f", extends {r.extends}" if r.extends else ""
    out.append(f"recipe   {_relative(resolved.path)}{extends}")
    out.append(f"hash     {resolved.content_hash}")
    # The status of the recipe as written (what --quant/--set resolve is not what was verified).
    out.append(f"status   {status}")
    if resolved.sets:
        out.append(f"--set    {' '.join(resolved.sets)}")
    out.append("")
    return out


def _model_lines(resolved: ResolvedRecipe) -> list[str]:
    r = resolved.recipe
    out: list[str] = []
    m = r.model
    out.append(
        f"model    {m.name} ({m.family}), {m.format} from {m.source.repo}"
        + (f"@{m.source.revision}" if m.source.revision else "")
    )
    if resolved.quant:
        q = r.quants[resolved.quant]
        size = f"{q.size_gib:g} GiB, " if q.size_gib else ""
        out.append(f"  quant {resolved.quant} ({size}min {q.min_gpus} GPUs)")
        for pattern in q.include:
            out.append(f"    include {pattern}")
        out += _why(q.use_when, 4)
        others = [name for name in r.quants if name != resolved.quant]
        if others:
            out.append(f"  other quants: {', '.join(others)}")
    else:
        for pattern in m.source.include:
            out.append(f"    include {pattern}")
    for name, extra in m.extras.items():
        size = f" ({extra.size_gib:g} GiB)" if extra.size_gib else ""
        out.append(f"  {name}: {extra.repo} {' '.join(extra.include)}{size}")
        out += _why(extra.why, 4)
    return out


def _hardware_lines(r) -> list[str]:
    plat = platforms.get(r.hardware.platform)
    out: list[str] = []
    hw = r.hardware
    desc = (
        f"{plat.name}, {plat.arch}" + (f", {plat.memory_gib:g} GiB" if plat and plat.memory_gib else "")
        if plat
        else "unknown platform"
    )
    out.append(f"hardware {hw.gpus}x {hw.platform} ({desc})" if hw.gpus else f"hardware {hw.platform} ({desc})")
    for note in hw.notes:
        out += textwrap.wrap(note, WIDTH, initial_indent="  ", subsequent_indent="  ")
    out.append("")
    return out


def _image_lines(resolved: ResolvedRecipe) -> list[str]:
    r = resolved.recipe
    hw = r.hardware
    out: list[str] = []
    img = r.image
    eng = img.engine
    pin = " ".join(
        x
        for x in (
            eng.version and f"=={eng.version}",
            eng.repo,
            eng.branch and f"branch {eng.branch}",
            eng.commit and f"commit {eng.commit}",
        )
        if x
    )
    out.append(f"image    engine {eng.package} {pin}".rstrip())
    out += _why(eng.why, 4)
    if img.base:
        out.append(f"  base {img.base}")
    if img.port:
        out.append(f"  port ports/{img.port}/")
    for name, s in img.extra.items():
        out += _setting_lines(f"{name}: {s.value}", s)
    out += fix_lines(resolved)
    for k in img.kernels:
        out += kernel_lines(k, hw.platform)
    return out


def _convert_env_serve_lines(r) -> list[str]:
    out: list[str] = []
    if r.convert:
        out.append("")
        out.append("convert")
        for i, step in enumerate(r.convert, 1):
            out.append(f"  {i}. tools/convert/{step.tool} {' '.join(step.args)}".rstrip())
            out += _why(step.why, 6)
    if r.env:
        out.append("")
        out.append("env")
        for name, s in r.env.items():
            out += _setting_lines(f"{name}={s.value}", s)
    out.append("")
    out.append(f"serve    {r.serve.command} {r.serve.model}")
    for key, s in r.serve.args.items():
        tokens = flag_tokens(key, s.value)
        out += _setting_lines(" ".join(tokens) or f"--{key} (unset)", s)
    return out


def _rule_lines(resolved: ResolvedRecipe) -> list[str]:
    r = resolved.recipe
    out: list[str] = []
    if r.rules:
        out.append("")
        out.append("rules (each refuses with the source's reason)")
        from cookbook.recipe.rules import fill_shown, rule_context

        ctx = rule_context(r, resolved.data, resolved.quant)
        for rule in r.rules:
            cond = (
                rule.when
                if rule.kind == "conflict"
                else (f"not ({rule.require})" if rule.when == "true" else f"{rule.when} and not ({rule.require})")
            )
            out.append(f"  {rule.id}: refuses when {cond}")
            out += textwrap.wrap(
                fill_shown(rule.message, ctx), WIDTH, initial_indent="      ", subsequent_indent="      "
            )
    return out


def _gate_and_reported_lines(r) -> list[str]:
    out: list[str] = []
    gates = {k: v for k, v in r.gates.model_dump(exclude_none=True).items()}
    if gates:
        out.append("")
        out.append("gates")
        for name, spec in gates.items():
            out += textwrap.wrap(
                f"{name}: {json.dumps(spec, sort_keys=True)}", WIDTH, initial_indent="  ", subsequent_indent="      "
            )
    for rep in r.reported:
        out.append("")
        out.append(f"reported (not verified here) — {rep.what}")
        out.append(f"  source: {rep.source}" + (f"; hardware: {rep.hardware}" if rep.hardware else ""))
        if rep.columns:
            out.append("  " + " | ".join(str(c) for c in rep.columns))
        for row in rep.rows:
            out.append("  " + " | ".join(str(c) for c in row))
        for k, v in rep.values.items():
            out.append(f"  {k}: {v}")
    return out


def _issue_and_verified_lines(resolved: ResolvedRecipe) -> list[str]:
    r = resolved.recipe
    out: list[str] = []
    if r.known_issues:
        out.append("")
        out.append("known issues")
        for issue in r.known_issues:
            out += textwrap.wrap(issue, WIDTH, initial_indent="  - ", subsequent_indent="    ")
    if r.verified:
        out.append("")
        of = "" if r.verified.recipe_hash == resolved.content_hash else ", of another configuration than shown"
        out.append(
            f"verified block {r.verified.date} (recipe {r.verified.recipe_hash[:19]}…{of}, bundle "
            f"{printable(str(r.verified.bundle)[:200])}; the status line says whether it holds)"
        )
    return out
