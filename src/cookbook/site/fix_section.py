"""A recipe page's Fixes section: the fix profile in the order it applies, the patches only
the port image holds, and the kernels."""

from __future__ import annotations

from pathlib import Path

from cookbook.fixes import pack, patchfile
from cookbook.site.markdown import cell


def fix_section(r) -> list[str]:
    fixes = r.image.fixes
    lines: list[str] = []
    if fixes.profile:
        lines += ["## Fixes", ""]
        try:
            infos = pack.resolve(fixes.profile, [f.name for f in fixes.opt_in])
        except pack.FixError as exc:
            lines += [f"Profile `{fixes.profile}` does not resolve: {cell(str(exc))}", ""]
            infos = []
        lines += [
            f"Profile `{fixes.profile}` (`fixes/profiles/{fixes.profile}.yaml`), applied in this order"
            + ", and checked by the launch block before the server starts"
            + ":",
            "",
        ]
        why_of = {f.name: f.why for f in fixes.opt_in}
        if infos:
            lines += ["| fix | provided by | what | why |", "|---|---|---|---|"]
            for f in infos:
                name = f"`{f.name}`" + (" (opt-in)" if f.opt_in else "")
                by = f"`{Path(f.patch).name}`" if f.patch else cell(f.provided_by)
                why = why_of.get(f.name) or f.reason or patch_reason(f.patch)
                lines.append(f"| {name} | {by} | {cell(f.summary)} | {cell(why or '')} |")
            lines.append("")
    if fixes.provided_by_port:
        lines += ["Patches that exist only inside the port image:", ""]
        lines += [f"- `{f.name}`" + (f": {cell(f.why)}" if f.why else "") for f in fixes.provided_by_port] + [""]
    if r.image.kernels:
        lines += ["Kernels:", ""]
        lines += [
            f"- `{k.name}` variant `{k.variant}`" + (f": {cell(k.why)}" if k.why else "") for k in r.image.kernels
        ] + [""]
    return lines


def patch_reason(patch) -> str:
    """A pack patch's DEP-3 long description (the Description field past its summary line)."""
    if patch is None:
        return ""
    try:
        description = patchfile.parse(Path(patch)).header.get("Description", "")
    except patchfile.PatchError:
        return ""
    return " ".join(description.split("\n", 1)[1].split()) if "\n" in description else ""
