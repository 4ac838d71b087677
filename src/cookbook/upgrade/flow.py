"""`cookbook upgrade SLUG --engine VERSION`: scratch engine, fix statuses, gates, report, and the new pin.

Everything runs in scratch first: the engine in .cache/upgrade/, a candidate fix pack (the new
profile and the patches it keeps) and a candidate recipes folder (the recipe with the new pin)
under OUT/candidate/, so the gates' bundle is of the upgraded recipe's own content hash. Only when
every gate passed (and not --dry-run) are the new profile, the evidence bundle and the recipe written
into the checkout, each atomically, the recipe last; then `gates verify` writes its verified block.
If that refuses, the three are put back as they were.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
from pathlib import Path

from cookbook.errors import FAILED, CookbookError
from cookbook.files import atomic_dir, atomic_write, repo_root
from cookbook.fixes.pack import PACK, load_profile, pack_dir
from cookbook.recipe.paths import recipes_dir
from cookbook.serving.local import quote_cmd, step
from cookbook.upgrade import fixstatus, pin
from cookbook.upgrade.report import Report, gate_rows
from cookbook.upgrade.scratch import ScratchEngine


def _machine() -> str:
    cores = os.cpu_count()
    mem = ""
    try:
        kb = int(next(ln for ln in open("/proc/meminfo") if ln.startswith("MemTotal")).split()[1])
        mem = f", {kb / 2**20:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{platform.machine()}, {cores} cores{mem}, load {os.getloadavg()[0]:.1f} at the start"


def _candidate_pack(root: Path, name: str, text: str, keep: list[Path]) -> Path:
    fixes = root / "fixes"
    (fixes / "profiles").mkdir(parents=True, exist_ok=True)
    for patch in keep:
        shutil.copy2(patch, fixes / patch.name)
    (fixes / "profiles" / f"{name}.yaml").write_text(text, encoding="utf-8")
    return fixes


def _candidate_recipes(root: Path, edits: dict[Path, dict[str, str]]) -> tuple[Path, dict[Path, str]]:
    """A copy of recipes/ (no evidence) with the pin moved; returns it and each edited file's new text."""
    src = recipes_dir()
    dest = root / "recipes"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("evidence"))
    texts = {}
    for path, values in edits.items():
        text = pin.set_scalars(path.read_text(encoding="utf-8"), values, path)
        (dest / path.resolve().relative_to(src.resolve())).write_text(text, encoding="utf-8")
        texts[path] = text
    return dest, texts


def run_upgrade(
    slug: str, version: str, out: Path, dry_run: bool = False, regression_tests: bool = True, command: str = ""
) -> Report:
    """Run the upgrade; the report is written to `out` whatever happens. Raises CookbookError when the
    upgrade stops (unknown version, an engine that does not install, a conflicting fix, a failed gate)."""
    engine = ScratchEngine(slug, version, repo_root() / ".cache")
    rep = Report(
        slug=slug,
        distribution=engine.distribution,
        current=engine.current_version,
        current_profile=engine.current_profile,
        version=version,
        command=command or f"cookbook upgrade {slug} --engine {version}" + (" --dry-run" if dry_run else ""),
        dry_run=dry_run,
        machine=_machine(),
    )
    out.mkdir(parents=True, exist_ok=True)
    try:
        _run(rep, engine, out, dry_run, regression_tests)
    except KeyboardInterrupt:
        rep.result = "interrupted"
        raise
    except CookbookError as e:
        rep.result = rep.result or f"stopped: {' '.join(e.format_message().split())}"
        raise
    finally:
        rep.write(out)
        step(f"report: {out / 'report.md'}")
    return rep


def _run(rep: Report, engine: ScratchEngine, out: Path, dry_run: bool, regression_tests: bool) -> None:
    from cookbook.recipe.resolve import resolve
    from cookbook.upgrade.gates import apply_profile, run_gates

    slug = engine.slug
    with rep.step("scratch engine", f"pip install {engine.requirement} torch (its pin) into {engine.root}"):
        engine.ensure()
        rep.torch = engine.torch_pin
    old = load_profile(engine.current_profile)
    with rep.step("fix statuses", f"classify {old.name} against {engine.vllm_dir}"):
        apply_profile(engine, None)  # the tree as released: a scratch engine reused after a gate run is patched
        statuses = fixstatus.classify(old, engine.vllm_dir, engine.python if regression_tests else None, step)
        rep.fixes = [s.to_json() for s in statuses]
    conflicts = [s for s in statuses if s.status == fixstatus.CONFLICTS]
    if dry_run:
        rep.result = "dry run: " + ", ".join(f"{s.name} {s.status}" for s in statuses)
        return
    if conflicts:
        rep.result = f"stopped before the gates: {len(conflicts)} fix(es) conflict"
        raise CookbookError(
            f"{len(conflicts)} fix(es) of {old.name} do not apply to {engine.requirement}: "
            + "; ".join(f"{s.name} ({', '.join(s.conflicts)})" for s in conflicts),
            help="re-base each patch on the new tree (`cookbook fixes refresh` where its lines only moved; by hand "
            "where they changed: fixes/README.md), add them to a profile for the new pin, then run again; "
            f"the report is in {out}",
            exit_code=FAILED,
        )
    name = pin.profile_name(engine.distribution, engine.version)
    root = repo_root().resolve()
    rel_report = str(out.resolve().relative_to(root)) if out.resolve().is_relative_to(root) else str(out)
    text = pin.profile_text(old, statuses, engine.version, engine.torch_pin, rep.command, rel_report)
    keep = [f.patch for f in old.fixes if f.provided_by == PACK and _kept(f.name, statuses)]
    candidate = out / "candidate"
    shutil.rmtree(candidate, ignore_errors=True)
    pack = _candidate_pack(candidate, name, text, keep)
    resolved = resolve(slug)
    edits = pin.recipe_edits(resolved, engine.version, name)
    recipes, new_texts = _candidate_recipes(candidate, edits)
    bundle = out / "bundle"
    if bundle.exists():
        shutil.rmtree(bundle)
    with rep.step("gates", f"cookbook gates run {slug} (server from {engine.bin_dir}, fix profile {name})"):
        run_gates(slug, engine, bundle, None, name, pack=pack, recipes=recipes)
    rep.bundle = str(bundle)
    results = json.loads((bundle / "results.json").read_text()) if (bundle / "results.json").is_file() else {}
    rep.gates = gate_rows(results)
    failed = [n for n, g in rep.gates.items() if g["status"] != "passed"]
    if not rep.gates or failed or not results.get("complete", False):
        rep.result = f"gates failed ({', '.join(failed) or 'no complete bundle'}): the recipe is unchanged"
        raise CookbookError(
            f"{slug} on {engine.requirement}: gate(s) {', '.join(failed) or '(none ran to completion)'} failed",
            help=f"the recipe, its pin and fix profile are unchanged; the bundle is {bundle}",
            exit_code=FAILED,
        )
    with rep.step("write the pin", f"fixes/profiles/{name}.yaml, recipes/{slug}/recipe.yaml, evidence, verify"):
        rep.written = _commit(slug, name, text, bundle, new_texts)
    rep.result = f"upgraded to {engine.requirement}: every gate passed; recipe verified on the new pin"


def _kept(name: str, statuses: list[fixstatus.FixStatus]) -> bool:
    return next((s.status for s in statuses if s.name == name), fixstatus.APPLIES) == fixstatus.APPLIES


def _commit(slug: str, name: str, profile_text: str, bundle: Path, recipe_texts: dict[Path, str]) -> list[str]:
    """Write the profile, the bundle and the recipe (last), then verify; on a refusal put all back."""
    from cookbook.evidence.verify import verify
    from cookbook.recipe.resolve import resolve

    started = json.loads((bundle / "results.json").read_text())["started"]  # 2026-12-01T13:34:39+00:00
    stamp = re.sub(r"[-:]", "", started)[:15] + "Z"
    evidence = recipes_dir() / slug / "evidence" / stamp
    profile_path = pack_dir() / "profiles" / f"{name}.yaml"
    before = {p: p.read_bytes() for p in recipe_texts}
    profile_before = profile_path.read_bytes() if profile_path.is_file() else None
    if evidence.exists():
        raise CookbookError(f"{evidence} exists already", help="move it away, then run again")
    with atomic_dir(evidence) as tmp:
        shutil.copytree(bundle, tmp, dirs_exist_ok=True)
    try:
        atomic_write(profile_path, profile_text)
        for path, text in recipe_texts.items():
            atomic_write(path, text)
        step(quote_cmd(["cookbook", "gates", "verify", slug, str(evidence)]))
        reasons, _ = verify(resolve(slug), evidence)
        if reasons:
            raise CookbookError("gates verify refused the bundle: " + "; ".join(reasons), exit_code=FAILED)
    except BaseException:
        for path, data in before.items():
            atomic_write(path, data)
        if profile_before is None:
            profile_path.unlink(missing_ok=True)
        else:
            atomic_write(profile_path, profile_before)
        shutil.rmtree(evidence, ignore_errors=True)
        raise
    root = repo_root()
    return [str(p.relative_to(root)) for p in (profile_path, *recipe_texts, evidence)]
