"""The new pin as text: the recipe with its engine version and fix profile moved, and the new fix profile.

The recipe is edited where each value is written (the file of the chain that sets it, found by the
resolver's locator), by splicing the new scalar in at the YAML node's own position (yaml.compose
marks), so comments, order and quoting of everything else stay byte for byte. A YAML library that
round-trips comments (ruamel) is not a dependency; a splice at the parser's marks does the same here.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import yaml

from cookbook.errors import FAILED, CookbookError
from cookbook.fixes.pack import Profile
from cookbook.upgrade.fixstatus import APPLIES, FixStatus


def _node_at(root: yaml.Node, dotted: str) -> yaml.ScalarNode | None:
    node = root
    for key in dotted.split("."):
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
        if node is None:
            return None
    return node if isinstance(node, yaml.ScalarNode) else None


def set_scalars(text: str, values: dict[str, str], where: Path) -> str:
    """`text` with each dotted key's scalar replaced (keeping its quote style), nothing else changed."""
    root = yaml.compose(text)
    edits = []
    for dotted, value in values.items():
        node = _node_at(root, dotted) if root is not None else None
        if node is None:
            raise CookbookError(f"{where}: no scalar {dotted} to move", exit_code=FAILED)
        quote = node.style if node.style in ("'", '"') else ""
        edits.append((node.start_mark.index, node.end_mark.index, f"{quote}{value}{quote}"))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    check = yaml.safe_load(text)
    for dotted, value in values.items():
        got = check
        for key in dotted.split("."):
            got = got[key]
        if str(got) != value:
            raise CookbookError(f"{where}: moving {dotted} to {value} gave {got!r}", exit_code=FAILED)
    return text


def recipe_edits(resolved, new_version: str, new_profile: str) -> dict[Path, dict[str, str]]:
    """file -> {dotted key: new value} for the pin (image.engine.version, image.fixes.profile)."""
    out: dict[Path, dict[str, str]] = {}
    for dotted, value in (("image.engine.version", new_version), ("image.fixes.profile", new_profile)):
        path = resolved.where(dotted)[0]
        out.setdefault(Path(path), {})[dotted] = value
    return out


def profile_name(distribution: str, version: str) -> str:
    return f"{distribution}-{version}"


def profile_text(old: Profile, statuses: list[FixStatus], version: str, torch: str, command: str, report: str) -> str:
    """The new profile: the old one's entries for the fixes that still apply (and those provided
    elsewhere), in order, each dropped one as a comment saying why."""
    data = yaml.safe_load(old.path.read_text(encoding="utf-8"))
    by_name = {s.name: s for s in statuses}
    today = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    lines = [
        f"# Fix profile for {old.distribution} {version}, written by `{command}` on {today}",
        f"# from {old.name}; each fix's status and its evidence: {report}.",
        "# Fixes apply in the order listed; `opt_in: true` fixes apply only when named.",
        "vllm:",
        f"  distribution: {old.distribution}",
        f"  version: {version}",
        f"  torch: {torch}  # the torch {old.distribution} {version} pins (its wheel's metadata)",
        "fixes:",
    ]
    kept, fixes_at = 0, len(lines) - 1
    for entry in data.get("fixes") or []:
        status = by_name.get(entry["name"])
        if status is not None and status.status != APPLIES:
            lines.append(f"  # dropped {entry['name']}: {status.status}: {' '.join(status.evidence.split())}")
            continue
        dumped = yaml.safe_dump([entry], sort_keys=False, width=100).rstrip("\n")
        lines += ["  " + ln for ln in dumped.splitlines()]
        kept += 1
    if not kept:
        lines[fixes_at] = "fixes: []"
    return "\n".join(lines) + "\n"
