"""One bisect step: what a gate's evidence bundle says about a version (outcome_from_bundle),
and the probe that makes that bundle (EngineProbe: a scratch engine at the version, the recipe
served from it, the one gate run, through cookbook.upgrade).

A version is skipped, not failed, when the gate never ran on it: its engine does not install,
its server does not start or answer, or the bundle does not hold the gate. A server that
dies while the gate runs is a failure: that can be the regression.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from cookbook.bisect.search import Outcome
from cookbook.errors import FAILED, CookbookError
from cookbook.gates.bundle import RESULTS
from cookbook.untrusted import printable

NEVER_RAN = ("server_down", "wrong_model")  # bundle faults set before the first gate started
PORT_TAKEN = "something already answers on"  # cookbook.serving.local.launch's refusal


def headline(measured: dict, limit: int = 2) -> str:
    """The gate's first numeric figures, `key=value`, for the step log."""
    numeric = [(k, v) for k, v in measured.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    out = [f"{printable(str(k))[:40]}={v}" for k, v in numeric[:limit]]
    return ", ".join(out)


def outcome_from_bundle(bundle: Path, gate: str) -> Outcome:
    where = str(bundle)
    try:
        doc = json.loads((bundle / RESULTS).read_text(encoding="utf-8"))
        result = doc["gates"].get(gate)
    except (OSError, ValueError, KeyError, AttributeError, TypeError, RecursionError) as e:
        return Outcome("skip", reason=f"no readable {RESULTS} in the bundle ({printable(str(e))[:160]})", bundle=where)
    if not isinstance(result, dict):
        return Outcome("skip", reason=f"the bundle holds no result for gate {gate}", bundle=where)
    status, reason = result.get("status"), printable(str(result.get("reason", "")))[:200]
    measured = result.get("measured") if isinstance(result.get("measured"), dict) else {}
    if status == "passed":
        return Outcome("pass", figure=headline(measured), bundle=where)
    if status == "failed" and result.get("fault") in NEVER_RAN and doc.get("fault") in NEVER_RAN:
        return Outcome("skip", reason=f"the gate never ran: {reason}", bundle=where)
    if status == "failed":
        return Outcome("fail", figure=headline(measured), reason=reason, bundle=where)
    return Outcome("skip", reason=f"gate {gate} was {printable(str(status))}: {reason}", bundle=where)


class EngineProbe:
    """version -> Outcome, each version's bundle at out/<version>/; the scratch engines live in
    cache/upgrade/ (cookbook.upgrade.scratch), shared with `cookbook upgrade`.

    fixes: "carried" (the pack's profile for the release, fixes/profiles/<dist>-<version>.yaml, where
    there is one; else the recipe's profile carried to it: cookbook.bisect.carry), "none"
    (each release as published) or a profile name (applied as it is: it fits its own pin only)."""

    def __init__(self, slug: str, gate: str, out: Path, cache: Path, fixes: str = "carried", echo=print):
        self.slug, self.gate, self.out, self.cache, self.fixes, self.echo = slug, gate, out, cache, fixes, echo

    def _fixes_for(self, engine, version: str) -> tuple[str | None, Path | None, str]:
        """(profile, pack folder or None for fixes/, what the step carries)."""
        if self.fixes == "none":
            return None, None, "none (as published)"
        if self.fixes != "carried":
            return self.fixes, None, f"profile {self.fixes}"
        from cookbook.bisect.carry import carry
        from cookbook.fixes.pack import known_profiles
        from cookbook.recipe.resolve import resolve

        image_fixes = resolve(self.slug).recipe.image.fixes
        if image_fixes is None or not image_fixes.profile:
            return None, None, "none (the recipe names no fix profile)"
        own = f"{engine.distribution}-{version}"
        if own in known_profiles():  # the pack has a profile made for this release: it, as it is
            return own, None, f"profile {own} (the pack's own for this release)"
        carried = carry(image_fixes.profile, engine, self.out / "fixes" / version)
        return carried.profile, carried.pack if carried.profile else None, carried.summary(image_fixes.profile)

    def __call__(self, version: str) -> Outcome:
        from cookbook.upgrade.gates import run_gates
        from cookbook.upgrade.scratch import ScratchEngine

        bundle = self.out / version
        self.echo(f"{version}: the engine's scratch venv (under {self.cache / 'upgrade'}) ...")
        try:
            engine = ScratchEngine(self.slug, version, self.cache)
            engine.ensure()
        except (CookbookError, OSError, subprocess.CalledProcessError) as e:
            return Outcome("skip", reason=f"the engine does not install: {_short(e)}")
        try:
            profile, pack, fixes = self._fixes_for(engine, version)
        except CookbookError as e:
            return Outcome("skip", reason=f"the fixes could not be carried: {_short(e)}")
        self.echo(f"{version}: fixes {fixes}; serving {self.slug} and running gate {self.gate} ...")
        try:
            bundle = Path(run_gates(self.slug, engine, bundle, [self.gate], profile, pack=pack))
        except CookbookError as e:
            if str(e).startswith(PORT_TAKEN):  # another server, not this version's: no verdict on it
                raise CookbookError(
                    f"{e.format_message()} (before the step of {version})",
                    help="stop that server, then run the bisect again with a new --out",
                    exit_code=FAILED,
                ) from None
            reason = f"the server did not start: {_short(e)}" + self._keep_log(engine, version)
            where = str(bundle) if (bundle / RESULTS).exists() else None
            return Outcome("skip", reason=reason, bundle=where, fixes=fixes)
        outcome = outcome_from_bundle(bundle, self.gate)
        outcome.fixes = fixes
        return outcome

    def _keep_log(self, engine, version: str) -> str:
        """Copy the server's log (where cookbook.upgrade.gates.run_gates starts it) beside the step's
        bundle, so the step's evidence stays in the bisect folder; says where, or nothing."""
        log = engine.root.parent / "serve" / f"{self.slug}-{version}" / "server.log"
        if not log.is_file():
            return ""
        kept = self.out / version / "server.log"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, kept)
        return f" (server log: {kept})"


def _short(e: Exception) -> str:
    """An error for one report cell: its first line and, when it quotes a log, the log's last line
    (where a traceback names the exception)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if not lines:
        return type(e).__name__
    text = lines[0] if len(lines) == 1 else f"{lines[0].rstrip(':')} ... {lines[-1]}"
    return printable(text)[:400]
