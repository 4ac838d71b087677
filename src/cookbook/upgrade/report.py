"""The upgrade report: report.json (everything) and report.md (the same as tables), written atomically."""

from __future__ import annotations

import datetime as dt
import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cookbook.files import atomic_write
from cookbook.untrusted import printable


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Report:
    slug: str
    distribution: str
    current: str  # the recipe's pinned version
    current_profile: str
    version: str  # the version tried
    command: str
    dry_run: bool
    started: str = field(default_factory=_now)
    machine: str = ""
    torch: str = ""
    steps: list[dict] = field(default_factory=list)
    fixes: list[dict] = field(default_factory=list)
    gates: dict[str, dict] = field(default_factory=dict)
    bundle: str = ""
    result: str = ""  # one line: what happened
    written: list[str] = field(default_factory=list)

    @contextmanager
    def step(self, name: str, command: str = ""):
        """Time a step; an exception is recorded as the step's error and raised on."""
        rec = {"step": name, "command": command, "seconds": None, "ok": False, "error": ""}
        self.steps.append(rec)
        t0 = time.monotonic()
        try:
            yield rec
            rec["ok"] = True
        except BaseException as e:
            rec["error"] = " ".join(str(e).split())[:2000] or type(e).__name__
            raise
        finally:
            rec["seconds"] = round(time.monotonic() - t0, 1)

    def to_json(self) -> dict:
        doc = {k: v for k, v in self.__dict__.items()}
        doc["finished"] = _now()
        doc["seconds_total"] = round(sum(s["seconds"] or 0 for s in self.steps), 1)
        return doc

    def markdown(self) -> str:
        doc = self.to_json()
        out = [
            f"# `cookbook upgrade {self.slug} --engine {self.version}`" + (" (dry run)" if self.dry_run else ""),
            "",
            f"- from: {self.distribution} {self.current} (fix profile {self.current_profile})",
            f"- to: {self.distribution} {self.version}" + (f", torch {self.torch}" if self.torch else ""),
            f"- command: `{self.command}`",
            f"- machine: {self.machine}" if self.machine else "",
            f"- started {self.started}, finished {doc['finished']}, {doc['seconds_total']:.0f} s in its steps",
            f"- **result: {printable(self.result)}**",
            "",
            "## Steps",
            "",
            "| step | seconds | ok | command or error |",
            "|---|---|---|---|",
        ]
        for s in self.steps:
            what = s["error"] or (f"`{s['command']}`" if s["command"] else "")
            out.append(f"| {s['step']} | {s['seconds']} | {'yes' if s['ok'] else 'NO'} | {_cell(what)} |")
        if self.fixes:
            out += ["", "## Fixes", "", "| fix | status | evidence |", "|---|---|---|"]
            out += [f"| {f['name']} | {f['status']} | {_cell(f['evidence'])} |" for f in self.fixes]
        if self.gates:
            out += ["", "## Gates", "", f"Bundle: `{self.bundle}`", "", "| gate | status | headline |", "|---|---|---|"]
            out += [f"| {n} | {g['status']} | {_cell(g['headline'])} |" for n, g in self.gates.items()]
        if self.written:
            out += ["", "## Written", ""] + [f"- `{w}`" for w in self.written]
        return "\n".join(line for line in out if line is not None) + "\n"

    def write(self, out: Path) -> None:
        atomic_write(out / "report.json", json.dumps(self.to_json(), indent=2) + "\n")
        atomic_write(out / "report.md", self.markdown())


def _cell(text: str) -> str:
    return printable(str(text)).replace("|", "\\|").replace("\n", " ")


def gate_rows(results: dict) -> dict[str, dict]:
    """Each gate's status and headline figures (its numeric measurements) from a bundle's results.json."""
    rows = {}
    for name, g in (results.get("gates") or {}).items():
        figures = {
            k: v
            for k, v in (g.get("measured") or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        headline = ", ".join(f"{k} {v}" for k, v in list(figures.items())[:3]) or " ".join(str(g.get("reason")).split())
        if g.get("status") != "passed" and g.get("reason"):
            headline = " ".join(str(g["reason"]).split())[:300]
        rows[name] = {"status": g.get("status", "?"), "headline": headline, "wall_s": g.get("wall_s")}
    return rows
