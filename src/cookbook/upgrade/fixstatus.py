"""Each fix of a profile against another engine's installed tree: applies, absorbed, conflicts, no-longer-reproduces.

The patch matching is the fix pack's own (cookbook.fixes.patchfile: zero fuzz, zero offset, and
"already applied upstream" when the patch reverses exactly); fixes are staged in order, each on the
text the ones before it left, as `cookbook fixes apply` stages them. A fix that applies, or that
conflicts, is then asked whether its bug still shows: its Verified-By regression tests
(tests/fixes/) run against the UNPATCHED new engine, which needs no patch to apply. They run in a
pytest child of this interpreter (the cookbook's venv, which has pytest) with COOKBOOK_ENGINE_PYTHON
set to the new engine's interpreter, so the fixtures copy that engine's tree and start their real
vLLM servers with it, and COOKBOOK_FIX_UNPATCHED=1, so the `patched_tree` fixture is a pristine copy
(tests/fixes/conftest.py). Such a test passes only where the bug is gone: then the fix no longer
reproduces, and a conflicting one needs no refresh. Verified-By entries annotated for another
distribution ("(vllm 0.30.0 source)") are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cookbook.files import repo_root
from cookbook.fixes import patchfile, refresh
from cookbook.fixes.pack import PACK, Profile, load_profile

APPLIES = "applies"
ABSORBED = "absorbed"
CONFLICTS = "conflicts"
NO_LONGER_REPRODUCES = "no-longer-reproduces"
STATUSES = (APPLIES, ABSORBED, CONFLICTS, NO_LONGER_REPRODUCES)


@dataclass
class FixStatus:
    name: str
    status: str
    evidence: str  # one line: why this status
    conflicts: list[str] = field(default_factory=list)  # "file: hunk @@ -N" for each hunk that does not match
    tests: list[str] = field(default_factory=list)  # the regression tests run (node ids)
    seconds: float = 0.0
    # A conflict whose lines only moved: the patch re-based on the staged texts (cookbook.fixes.refresh)
    # and the hunks that moved. Not in the report's JSON: the patch is the evidence's command away.
    refreshed: str = field(default="", repr=False)
    moved: list[refresh.Moved] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        out = asdict(self)
        del out["refreshed"], out["moved"]
        return out


def _hunk_label(fp: patchfile.FilePatch, i: int, text: str) -> str:
    """Which hunk, and whether its lines are elsewhere in the file (moved: a refresh) or gone (changed)."""
    h = fp.hunks[i]
    at = [j + 1 for j in patchfile.find_block(text.splitlines(keepends=True), h.old)]
    where = f"its lines are at line {at[0]} ({at[0] - h.old_start:+d})" if at else "its lines changed"
    return f"{fp.path}: hunk {i + 1} (@@ -{h.old_start},{len(h.old)}): {where}"


def _refreshed(patch: patchfile.Patch, texts: dict[str, str | None], applies_to: str):
    """The patch re-based on the staged texts and its moved hunks, or None where a hunk's lines changed."""
    try:
        return refresh.refresh(patch.source, texts.get, applies_to)
    except patchfile.PatchError:
        return None


def _stage_one(
    patch: patchfile.Patch, texts: dict[str, str | None], target: Path, applies_to: str, stage_refreshed: bool
) -> tuple[str, str, list[str], tuple[str, list] | None]:
    """(status, evidence, conflicting hunks, (refreshed patch, moved hunks) or None) of one patch on the
    staged texts; updates texts when it applies, or, with `stage_refreshed`, when its refresh does."""
    for fp in patch.files:
        if fp.path not in texts:
            src = target / fp.path
            texts[fp.path] = src.read_text(encoding="utf-8") if src.is_file() else None
    results, present, failed = patchfile.sort_files(patch, texts)
    conflicts = []
    for fp in (fp for fp in patch.files if fp.path in failed):
        text = texts[fp.path]
        if text is None:
            conflicts.append(f"{fp.path}: file absent")
            continue
        conflicts += [
            _hunk_label(fp, i, text)
            for i, h in enumerate(fp.hunks)
            if patchfile.apply_to_text(patchfile.FilePatch(fp.path, [h]), text) is None
        ] or [f"{fp.path}: hunks overlap"]
    if conflicts:
        moved = _refreshed(patch, texts, applies_to)
        if moved is not None and stage_refreshed:
            for fp in patchfile.parse_text(moved[0], patch.source).files:
                texts[fp.path] = patchfile.apply_to_text(fp, texts[fp.path])
        return CONFLICTS, f"{len(conflicts)} hunk(s) do not match: " + "; ".join(conflicts), conflicts, moved
    if present and not results:
        return ABSORBED, f"already applied upstream: {', '.join(present)} already hold(s) its change", [], None
    if present:  # part of it upstream, part not: the patch needs a refresh to the part left
        return CONFLICTS, f"partly upstream ({', '.join(present)} hold its change): refresh the patch", present, None
    texts.update(results)
    return APPLIES, f"applies exactly to {', '.join(results)}", [], None


def regression_tests(patch: patchfile.Patch, distribution: str) -> list[str]:
    """The Verified-By node ids to run on an engine of `distribution` (entries noted for another one are not)."""
    out = []
    for entry in re.split(r",\s*(?=tests/)", " ".join(patch.header.get("Verified-By", "").split())):
        m = re.match(r"(tests/\S+::\w+)\s*(?:\(([^)]*)\))?", entry.strip())
        if not m:
            continue
        note = (m.group(2) or "").split()
        if note and note[0] != distribution:
            continue
        out.append(m.group(1))
    return out


_EXC_LINE = re.compile(r"^(?:E\s+)?\s*([\w.]+(?:Error|Exception|Exit)\b:.*)$", re.M)


def _gist(message: str) -> str:
    """A failure message in one line: its first line, and the last exception line of a traceback in it."""
    first = " ".join(message.strip().splitlines()[0].split())[:160] if message.strip() else ""
    last = _EXC_LINE.findall(message)
    tail = " ".join(last[-1].split())[:160] if last else ""
    return first if not tail or tail in first else f"{first} ... {tail}"


def probe(tests: list[str], engine_python: Path) -> tuple[str, str]:
    """Run regression tests on the unpatched engine: (passed|failed|not-run, one-line evidence)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        env = {**os.environ, "COOKBOOK_ENGINE_PYTHON": str(engine_python), "COOKBOOK_FIX_UNPATCHED": "1"}
        # --tier all: a fix's reproduction sits in the suite's slow tier, which a plain pytest leaves out
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tier", "all", f"--junitxml={report}"]
        argv += tests
        proc = subprocess.run(argv, cwd=repo_root(), env=env, capture_output=True, text=True)
        if not report.is_file():
            return "not-run", f"pytest exited {proc.returncode} with no report: {proc.stdout.strip()[-200:]}"
        cases = ET.parse(report).getroot().iter("testcase")
        outcomes = []
        for case in cases:
            kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
            kind = kinds[0] if kinds else "passed"
            # pytest cuts the message attribute short; the element's text holds the whole report
            msg = next((c.get("message", "") + "\n" + (c.text or "") for c in case if c.tag == kind), "")
            outcomes.append((case.get("name", "?"), kind, _gist(msg)))
    if not outcomes:
        return "not-run", f"pytest collected none of {', '.join(tests)}"
    if any(k == "failure" for _, k, _ in outcomes):
        name, _, msg = next(o for o in outcomes if o[1] == "failure")
        return "failed", f"{name} fails unpatched: {msg}"
    if all(k == "passed" for _, k, _ in outcomes):
        return "passed", f"{', '.join(n for n, _, _ in outcomes)} pass(es) on the unpatched engine"
    # an error in a fixture (setup) or a skip says nothing about the bug
    name, kind, msg = next(o for o in outcomes if o[1] != "passed")
    return "not-run", f"{name} {'could not set up' if kind == 'error' else 'skipped'}: {msg}"


def classify(
    profile: Profile | str,
    target_dir: Path,
    engine_python: Path | None = None,
    log=lambda msg: None,
    applies_to: str = "",
    stage_refreshed: bool = False,
) -> list[FixStatus]:
    """Each pack fix of `profile` (opt-ins included) against the pristine tree `target_dir`, in order.
    With `engine_python` (the tree's interpreter), each fix that applies has its regression tests run.
    A conflict whose lines only moved carries its refreshed patch (Applies-To: `applies_to`); with
    `stage_refreshed` the later fixes are staged on top of it, as they would be applied."""
    prof = load_profile(profile) if isinstance(profile, str) else profile
    texts: dict[str, str | None] = {}
    out = []
    for fix in prof.fixes:
        if fix.provided_by != PACK:
            continue
        t0 = time.monotonic()
        patch = patchfile.parse(fix.patch)
        status, evidence, conflicts, moved = _stage_one(
            patch, texts, target_dir, applies_to or f"{prof.distribution} (refresh check)", stage_refreshed
        )
        stood = "applies" if status == APPLIES else f"it conflicts ({evidence})"  # before the notes below
        if moved is not None:
            command = f"cookbook fixes refresh fixes/{patch.source.name} --target {target_dir}"
            evidence += f"; its lines only moved: `{command}` re-bases it"
        tests: list[str] = []
        if status == APPLIES or (status == CONFLICTS and engine_python is not None):
            tests = regression_tests(patch, prof.distribution)
            if engine_python is None or not tests:
                evidence += "; regression test not run" + ("" if tests else " (Verified-By names none for this engine)")
            else:
                log(f"{fix.name}: {status}; running {', '.join(tests)} against the unpatched engine")
                verdict, line = probe(tests, engine_python)
                if verdict == "passed":
                    status, evidence = NO_LONGER_REPRODUCES, f"{stood}, but {line}: the bug is gone"
                elif verdict == "failed":
                    evidence += f"; the bug still shows: {line}"
                else:
                    evidence += f"; regression test not run: {line}"
        refreshed, hunks = moved if moved is not None else ("", [])
        out.append(
            FixStatus(
                fix.name,
                status,
                evidence,
                conflicts,
                tests,
                round(time.monotonic() - t0, 1),
                refreshed,
                hunks,
            )
        )
        log(f"{fix.name}: {status}: {evidence}")
    return out
