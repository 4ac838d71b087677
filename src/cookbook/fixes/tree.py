"""Apply, check and revert a resolved fix set on an installed vllm package tree.

Strict by design: the target must be the profile's pinned version, every hunk must
match exactly, and the whole set applies or nothing is written. The applied state is
recorded in <target>/.cookbook-fixes/ (state.json plus the original files), so a second
apply of the same set is a no-op, `check` finds drift, and `revert` restores the
originals byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from cookbook.files import atomic_write
from cookbook.fixes import patchfile
from cookbook.fixes.pack import (
    PACK,
    FixError,
    FixInfo,
    Profile,
    known_profiles,
    load_profile,
    resolve_profile,
    set_hash,
)
from cookbook.untrusted import loads_json

STATE_DIR = ".cookbook-fixes"
STATE_FILE = "state.json"
_VERSION_RE = re.compile(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", re.M)


@dataclass
class Outcome:
    """What a command did, for printing: lines to show and the set hash."""

    lines: list[str] = field(default_factory=list)
    set_hash: str = ""
    changed: bool = False


def default_target() -> Path:
    """The installed vllm package of the engine venv, found without importing vllm."""
    from cookbook.engine import SETUP_HINT, engine_python, vllm_package_dir

    found = vllm_package_dir()
    if found is None:
        raise FixError(
            f"no installed vllm package found for {engine_python()}\n"
            f"help: {SETUP_HINT}, or pass --target DIR (the vllm package directory)"
        )
    return found


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def target_version(target: Path) -> str:
    vfile = target / "_version.py"
    if not target.is_dir():
        raise FixError(
            f"target {target} is not a directory\nhelp: pass the vllm package directory (…/site-packages/vllm)"
        )
    try:
        m = _VERSION_RE.search(vfile.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):  # missing, or not text: not a vllm package
        m = None
    if not m:
        raise FixError(
            f"cannot read the vLLM version from {vfile}\n"
            "help: --target must be a vllm package directory (it holds _version.py)"
        )
    return m.group(1)


def installed_distributions(target: Path) -> set[str]:
    """Distributions whose dist-info sits beside the target and ships it (empty for a bare copy)."""
    names = set()
    for info in target.parent.glob("*.dist-info"):
        top = info / "top_level.txt"
        record = info / "RECORD"
        ships_vllm = (top.is_file() and "vllm" in top.read_text().split()) or (
            record.is_file() and f"{target.name}/_version.py" in record.read_text(errors="replace")
        )
        if ships_vllm:
            names.add(info.name[: -len(".dist-info")].rsplit("-", 1)[0].replace("_", "-").lower())
    return names


def check_pin(profile: Profile, target: Path) -> str:
    found = target_version(target)
    if found != profile.version and not found.startswith(profile.version + "+"):
        raise FixError(
            f"target {target} is vLLM {found}; profile {profile.name} is pinned to "
            f"{profile.distribution} {profile.version}\n"
            f"help: install {profile.distribution}=={profile.version}, or pick the profile for {found} "
            f"(see fixes/profiles/)"
        )
    dists = installed_distributions(target)
    if dists and profile.distribution.lower() not in dists:
        raise FixError(
            f"target {target} was installed by {', '.join(sorted(dists))}; profile {profile.name} "
            f"is pinned to {profile.distribution} {profile.version}\n"
            f"help: use the profile for that distribution"
        )
    return found


def _read_state(target: Path) -> dict | None:
    path = target / STATE_DIR / STATE_FILE
    if not path.is_file():
        return None
    try:
        state = loads_json(path.read_bytes(), what=STATE_FILE)
    except (ValueError, OSError):
        raise FixError(
            f"{path} is corrupt\nhelp: reinstall the engine (scripts/setup-engine) to get a clean tree"
        ) from None
    _check_state_paths(state, target, path)
    return state


def pack_paths() -> set[str]:
    """Every file a patch of the pack names (relative to the vllm package dir)."""
    out: set[str] = set()
    for name in known_profiles():
        try:
            profile = load_profile(name)
        except FixError:
            continue
        for fix in profile.fixes:
            if fix.patch is None:
                continue
            try:
                out |= {fp.path for fp in patchfile.parse(fix.patch).files}
            except patchfile.PatchError:
                continue
    return out


def _inside(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def _check_state_paths(state: object, target: Path, path: Path) -> None:
    """The state file only steers files inside `target` that the pack's patches name; its
    originals lie inside the state dir. Anything else is refused, whole, before a write."""
    files = state.get("files") if isinstance(state, dict) else None
    if not isinstance(files, dict) or not all(
        isinstance(rec, dict) and all(k in rec and isinstance(rec[k], (str, type(None))) for k in ("before", "after"))
        for rec in files.values()
    ):
        raise FixError(
            f"{path} is corrupt (no `files` mapping of before/after hashes)\n"
            "help: reinstall the engine (scripts/setup-engine) to get a clean tree"
        )
    state_dir = target / STATE_DIR
    named = pack_paths()
    bad = [STATE_DIR] if state_dir.is_symlink() else []
    for rel in files:
        parts = Path(rel).parts
        if (
            rel not in named
            or Path(rel).is_absolute()
            or ".." in parts
            or not _inside((target / rel).parent, target)
            or (files[rel]["before"] is not None and not _inside(state_dir / "orig" / rel, state_dir))
        ):
            bad.append(rel)
    if bad:
        raise FixError(
            f"{path} names files that are not the fix pack's patched files inside {target}: "
            + ", ".join(repr(b) for b in bad)
            + "\nhelp: nothing was changed; this state was not written by `cookbook fixes apply`: "
            "reinstall the engine (scripts/setup-engine) to get a clean tree"
        )


def _write_atomic(path: Path, data: bytes) -> None:
    atomic_write(path, data)
    # Stale bytecode would keep running the old source if size and mtime collide.
    for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)


def _refuse_interrupted(state: dict | None, target: Path) -> None:
    if state is not None and state.get("committing"):
        raise FixError(
            f"an earlier `cookbook fixes apply` on {target} was interrupted while writing its files\n"
            f"help: run `cookbook fixes revert --target {target}` (it puts every original back), then apply again"
        )


def _write_state(state_dir: Path, state: dict) -> None:
    _write_atomic(state_dir / STATE_FILE, (json.dumps(state, indent=2) + "\n").encode())


def _restore(target: Path, originals: dict[str, bytes | None]) -> None:
    """Put back the original bytes of each file (one the set created, with no original, is removed)."""
    for rel, data in originals.items():
        if data is None:
            (target / rel).unlink(missing_ok=True)
        else:
            _write_atomic(target / rel, data)


def _stage(
    fixes: list[FixInfo],
    target: Path,
    base: dict[str, bytes | None] | None = None,
) -> tuple[dict[str, bytes | None], dict[str, bytes], list[str]]:
    """Apply every pack fix in memory. Returns (originals, results, errors).
    `base` overrides the content of some files (the originals of a set being replaced)."""
    originals: dict[str, bytes | None] = {}
    staged: dict[str, str | None] = {}
    errors: list[str] = []
    for fix in fixes:
        if fix.provided_by != PACK:
            continue
        try:
            patch = patchfile.parse(fix.patch)
        except patchfile.PatchError as e:
            errors.append(f"fix {fix.name}: {e}")
            continue
        for fp in patch.files:
            if fp.path not in staged:
                src = target / fp.path
                if base is not None and fp.path in base:
                    raw = base[fp.path]
                else:
                    raw = src.read_bytes() if src.is_file() else None
                originals[fp.path] = raw
                try:
                    staged[fp.path] = raw.decode("utf-8") if raw is not None else None
                except UnicodeDecodeError as e:
                    errors.append(
                        f"fix {fix.name}: {fp.path} is not UTF-8 text (byte {e.start}); not the pinned source"
                    )
                    staged[fp.path] = None
                    continue
        results, upstream, failed = patchfile.sort_files(patch, staged)
        if upstream and not failed and not results:
            errors.append(
                f"fix {fix.name}: already applied upstream: drop it from the profile "
                f"({', '.join(upstream)} already hold its change)"
            )
        elif failed or upstream:
            bad = ", ".join(failed + upstream)
            errors.append(
                f"fix {fix.name} does not apply exactly to {target}: {bad} differs from what "
                f"{fix.patch.name} expects (drift; zero fuzz)\n"
                f"help: the target is not the pristine pinned tree; reinstall it (scripts/setup-engine) "
                f"or refresh the patch"
            )
        else:
            staged.update(results)
    return originals, {p: t.encode("utf-8") for p, t in staged.items() if t is not None}, errors


def _state_matches(state: dict, target: Path) -> list[str]:
    """Drift between the recorded applied state and the files on disk."""
    drift = []
    for rel, rec in state.get("files", {}).items():
        path = target / rel
        now = _sha(path.read_bytes()) if path.is_file() else None
        # An interrupted commit left each file either patched or as it was.
        if now != rec["after"] and not (state.get("committing") and now == rec["before"]):
            drift.append(f"{rel}: {'missing' if now is None else 'changed'} since fixes were applied")
    return drift


def _summary_lines(fixes: list[FixInfo], verb: str) -> list[str]:
    out = []
    for f in fixes:
        tag = verb if f.provided_by == PACK else f"by {f.provided_by}"
        opt = " (opt-in)" if f.opt_in else ""
        out.append(f"  {f.name:<32} {tag}{opt}: {f.summary}")
    return out


def apply(profile_name: str, opt_in: list[str], target: Path, replace: bool = False) -> Outcome:
    """Apply the resolved set. replace=True first reverts a different set recorded on the
    target (refused if those files drifted), e.g. after the pack changed."""
    profile, fixes = resolve_profile(profile_name, opt_in)
    found = check_pin(profile, target)
    digest = set_hash(profile, fixes)
    out = Outcome(set_hash=digest)
    out.lines.append(f"fix profile {profile.name} ({profile.distribution} {found}) on {target}")
    state = _read_state(target)
    _refuse_interrupted(state, target)
    base = None
    if state is not None and state.get("set_hash") != digest and replace:
        # Stage against the recorded originals first: if the new set does not apply,
        # the old one stays as it is (all or nothing).
        drift = _state_matches(state, target)
        if drift:
            raise FixError(
                f"{target} changed since fix set {state.get('set_hash')} was applied:\n  "
                + "\n  ".join(drift)
                + "\nhelp: reinstall the engine (scripts/setup-engine)"
            )
        base = {
            rel: ((target / STATE_DIR / "orig" / rel).read_bytes() if rec["before"] is not None else None)
            for rel, rec in state.get("files", {}).items()
        }
    elif state is not None:
        if state.get("set_hash") != digest:
            raise FixError(
                f"{target} already holds fix set {state.get('set_hash')} "
                f"(profile {state.get('profile')}: {', '.join(state.get('fixes', []))})\n"
                f"help: run `cookbook fixes revert --target {target}` first, or apply with --replace"
            )
        drift = _state_matches(state, target)
        if drift:
            raise FixError(
                f"fix set {digest} is recorded on {target} but the tree drifted:\n  "
                + "\n  ".join(drift)
                + "\nhelp: reinstall the engine (scripts/setup-engine) and apply again"
            )
        out.lines += _summary_lines(fixes, "applied")
        out.lines.append("already applied: nothing to do")
        return out
    originals, results, errors = _stage(fixes, target, base)
    if errors:
        raise FixError("nothing was applied (all or nothing):\n" + "\n".join(errors))
    if base is not None:
        out.lines += revert(target).lines
    state_dir = target / STATE_DIR
    files = {}
    for rel, data in results.items():
        orig = originals[rel]
        if orig is not None:
            _write_atomic(state_dir / "orig" / rel, orig)
        files[rel] = {"before": _sha(orig) if orig is not None else None, "after": _sha(data)}
    state = {
        "profile": profile.name,
        "pin": f"{profile.distribution}=={profile.version}",
        "set_hash": digest,
        "fixes": [f.name for f in fixes if f.provided_by == PACK],
        "provided_elsewhere": {f.name: f.provided_by for f in fixes if f.provided_by != PACK},
        "files": files,
    }
    # All or nothing through the commit: the state says `committing` until every file is in
    # place, and a failed write puts back every original before the error reaches the user. A
    # kill in between leaves a committing state that `revert` undoes (each file is at its
    # original or its patched bytes) and that apply and check refuse.
    _write_state(state_dir, {**state, "committing": True})
    written: list[str] = []
    try:
        for rel, data in results.items():
            _write_atomic(target / rel, data)
            written.append(rel)
    except BaseException as e:
        _restore(target, {rel: originals[rel] for rel in written})
        shutil.rmtree(state_dir, ignore_errors=True)
        if not isinstance(e, OSError):
            raise
        raise FixError(
            f"writing {target / (list(results)[len(written)])} failed ({e.strerror or e}); every file was "
            "put back as it was: nothing was applied"
        ) from None
    _write_state(state_dir, state)
    out.changed = True
    out.lines += _summary_lines(fixes, "applied")
    return out


def check(profile_name: str, opt_in: list[str], target: Path) -> Outcome:
    profile, fixes = resolve_profile(profile_name, opt_in)
    found = check_pin(profile, target)
    digest = set_hash(profile, fixes)
    state = _read_state(target)
    _refuse_interrupted(state, target)
    problems = []
    if state is None:
        problems.append(f"no fixes applied to {target}")
    else:
        if state.get("set_hash") != digest:
            problems.append(
                f"applied set {state.get('set_hash')} ({', '.join(state.get('fixes', []))}) "
                f"is not the profile's set {digest}"
            )
        problems += _state_matches(state, target)
    if problems:
        raise FixError(
            f"fix profile {profile.name} check failed on {target}:\n  "
            + "\n  ".join(problems)
            + f"\nhelp: run `cookbook fixes apply --profile {profile.name}"
            + "".join(f" --opt-in {n}" for n in opt_in)
            + f" --target {target}` on a pristine tree"
        )
    out = Outcome(set_hash=digest)
    out.lines.append(f"fix profile {profile.name} ({profile.distribution} {found}) on {target}")
    out.lines += _summary_lines(fixes, "ok")
    return out


def revert(target: Path, force: bool = False) -> Outcome:
    state = _read_state(target)
    out = Outcome()
    if state is None:
        out.lines.append(f"no fixes applied to {target}: nothing to revert")
        return out
    drift = _state_matches(state, target)
    if drift and not force:
        raise FixError(
            f"{target} changed since fixes were applied; revert would overwrite those changes:\n  "
            + "\n  ".join(drift)
            + "\nhelp: pass --force to restore the originals anyway"
        )
    state_dir = target / STATE_DIR
    _restore(
        target,
        {
            rel: None if rec["before"] is None else (state_dir / "orig" / rel).read_bytes()
            for rel, rec in state.get("files", {}).items()
        },
    )
    shutil.rmtree(state_dir)
    out.set_hash = state.get("set_hash", "")
    out.changed = True
    out.lines.append(f"reverted fix set {out.set_hash} ({', '.join(state.get('fixes', []))}) on {target}")
    return out
