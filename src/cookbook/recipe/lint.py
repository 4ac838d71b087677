"""`cookbook lint`: every problem in a recipe file, collected, with positions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cookbook import platforms
from cookbook.recipe import checks_paths, expr
from cookbook.recipe import errors as E
from cookbook.recipe.chain import load_chain, locator, merge_chain
from cookbook.recipe.quants import apply_quant
from cookbook.recipe.resolve import ResolvedRecipe, file_diagnostics, resolved_from
from cookbook.recipe.rules import WHY_REF, check_rules
from cookbook.recipe.validation import validate
from cookbook.recipe.verified import BUNDLE_MISSING, BUNDLE_REFUSED, STALE, UNVERIFIED, block_status

# A recipe's status and the reasons behind it: cookbook.evidence.status.status_and_reasons.
StatusCheck = Callable[[ResolvedRecipe], tuple[str, list[str]]]


def lint_file(path: Path, status_check: StatusCheck | None = None) -> list[E.Diagnostic]:
    """Every problem of one recipe file. The file (and its extends chain) is loaded, merged
    and validated once; the status check reuses that resolution."""
    try:
        chain = load_chain(path)
    except E.RecipeError as exc:
        for d in exc.diagnostics:
            d.file = d.file or path
        return exc.diagnostics
    leaf = chain[-1]

    locate = locator(chain)

    def diag(kind, key, problem, help=None):
        file, line, col = locate(key)
        return E.Diagnostic(kind, key, problem, help, file, line, col)

    data = merge_chain(chain)
    out: list[E.Diagnostic] = []
    name = data.get("name")
    folder = leaf.path.parent.name
    if isinstance(name, str) and name != folder:
        out.append(
            diag(
                E.NAME_MISMATCH,
                "name",
                f"name {name!r} but the folder is {folder!r}",
                f"set `name: {folder}` or move the file to recipes/{name}/recipe.yaml",
            )
        )
    recipe, val = validate(data, locate)
    out += val
    out += _raw_checks(data, diag)
    if recipe is None:
        return _in_file_order(out)
    out += _fix_diagnostics(recipe, diag)
    out += checks_paths.check(recipe, diag)
    out += file_diagnostics(data, locate)
    resolved_data, quant, qd = apply_quant(data, None, folder) if not recipe.abstract else (data, None, [])
    if not recipe.abstract and not any(d.kind is E.BAD_EXPRESSION for d in out):
        for d in qd:
            d.file, (d.line, d.col) = leaf.path, leaf.where(d.key)
        out += qd
        if not qd:
            for d in check_rules(recipe, resolved_data, quant, locate):
                d.kind = E.DEFAULT_REFUSED
                out.append(d)
    out += _gate_checks(recipe, diag)
    # Without the evidence wing's answer (status_check) only what the block alone says (stale) is checked.
    if recipe.verified is not None and not recipe.abstract:
        # The configuration the gates ran on: the default quant applied (its overrides
        # validated on their own only when it has some).
        applied = recipe if resolved_data is data else validate(resolved_data, locate)[0]
        if not applied:
            status, reasons = UNVERIFIED, []
        else:
            resolved = resolved_from(chain, resolved_data, applied, quant)
            status, reasons = status_check(resolved) if status_check else (block_status(resolved), [])
        if status == STALE:
            out.append(
                diag(
                    E.STALE_VERIFIED,
                    "verified",
                    "the recipe changed after it was verified (recipe_hash differs)",
                    f"run gates/run.sh {folder} and `cookbook gates verify {folder} BUNDLE`",
                )
            )
        elif status in (BUNDLE_MISSING, BUNDLE_REFUSED):
            out.append(
                diag(
                    E.UNEARNED_VERIFIED,
                    "verified",
                    f"status {status}: " + "; ".join(reasons[:3])[:400],
                    f"run gates/run.sh {folder} and `cookbook gates verify {folder} BUNDLE` (it lists every reason)",
                )
            )
    return _in_file_order(out)


def _gate_checks(recipe, diag) -> list[E.Diagnostic]:
    """A recipe that can be verified declares a gate; a benchmark-only one holds no verified block."""
    if recipe.abstract:
        return []
    if recipe.gates.benchmark_only:
        if recipe.verified is not None:
            return [diag(E.BENCHMARK_VERIFIED, "verified", "a benchmark-only recipe holds a verified block")]
        return []
    if not recipe.gates.declared():
        return [
            diag(
                E.NO_GATES,
                "gates",
                "the recipe declares no gate, so it could never be verified",
                "declare the gates its source document verified it with under `gates:`, or set "
                "`gates.benchmark_only: <why>` on a dummy-weight benchmark recipe",
            )
        ]
    return []


def _raw_checks(data: dict, diag) -> list[E.Diagnostic]:
    """Checks that do not need a valid model, so one bad key does not hide the rest."""
    out = []
    platform = (data.get("hardware") or {}).get("platform") if isinstance(data.get("hardware"), dict) else None
    if isinstance(platform, str) and platform not in platforms.CATALOGUE:
        out.append(
            diag(
                E.UNKNOWN_PLATFORM,
                "hardware.platform",
                f"unknown platform {platform!r}",
                f"platforms: {', '.join(platforms.CATALOGUE)}",
            )
        )
    quants = data.get("quants")
    if isinstance(quants, dict) and quants:
        defaults = [q for q, s in quants.items() if isinstance(s, dict) and s.get("default")]
        if len(defaults) != 1:
            out.append(
                diag(
                    E.QUANT_DEFAULTS,
                    "quants",
                    f"{len(defaults)} quants are marked default ({', '.join(defaults) or 'none'})",
                    "mark exactly one quant `default: true`",
                )
            )
    rules = data.get("rules")
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        for field in ("message", "help"):  # a `{KEY.why}` merge_chain could not fill
            text = rule.get(field) if isinstance(rule, dict) else None
            for key in WHY_REF.findall(text) if isinstance(text, str) else []:
                out.append(
                    diag(
                        E.BAD_VALUE,
                        f"rules.{i}.{field}",
                        f"cites {{{key}.why}} but {key} is not a setting with a why",
                        "cite a {value, why} setting of this recipe, e.g. {serve.args.block_size.why}",
                    )
                )
        for field in ("when", "require"):
            text = rule.get(field) if isinstance(rule, dict) else None
            if not isinstance(text, str):
                continue
            try:
                expr.parse(text)
            except expr.ExprError as exc:
                out.append(
                    diag(E.BAD_EXPRESSION, f"rules.{i}.{field}", str(exc), "see docs/rules.md for the rule language")
                )
    return out


def _fix_diagnostics(recipe, diag) -> list[E.Diagnostic]:
    fixes = recipe.image.fixes
    if not fixes.profile:
        return []
    try:
        from cookbook.fixes import pack
    except ImportError:  # the fix pack is optional in a partial checkout
        return []
    try:
        pack.resolve(fixes.profile, [f.name for f in fixes.opt_in])
    except pack.FixError as exc:
        return [
            diag(
                E.UNKNOWN_FIX, "image.fixes", str(exc).splitlines()[0], f"profiles: {', '.join(pack.known_profiles())}"
            )
        ]
    return []


def _in_file_order(diags: list[E.Diagnostic]) -> list[E.Diagnostic]:
    return sorted(diags, key=lambda d: (str(d.file), d.line or 0, d.col or 0, d.kind.id))
