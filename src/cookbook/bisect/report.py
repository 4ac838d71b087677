"""The bisect report: DIR/report.json (everything, for tools) and DIR/report.md (for people),
rewritten after every step so an interrupted or killed search leaves the finished steps."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cookbook.bisect.releases import ReleaseList
from cookbook.bisect.search import Answer, Step
from cookbook.files import atomic_write

State = Literal["running", "complete", "interrupted", "ends do not hold", "stopped"]


@dataclass
class Report:
    slug: str
    gate: str
    releases: ReleaseList
    command: str
    started: str
    steps: list[Step] = field(default_factory=list)
    state: State = "running"
    answer: Answer | None = None
    note: str = ""  # why it stopped, when it did not finish
    finished: str | None = None

    def to_json(self) -> dict:
        a = self.answer
        return {
            "report_format": 1,
            "slug": self.slug,
            "gate": self.gate,
            "engine": self.releases.dist,
            "index": self.releases.index,
            "good": self.releases.versions[0],
            "bad": self.releases.versions[-1],
            "versions": self.releases.versions,
            "excluded": [{"version": v, "why": why} for v, why in self.releases.excluded],
            "command": self.command,
            "started": self.started,
            "finished": self.finished,
            "state": self.state,
            "note": self.note,
            "steps": [s.to_json() for s in self.steps],
            "answer": None
            if a is None
            else {
                "first_bad": a.first_bad,
                "last_good": a.last_good,
                "candidates": a.candidates,
                "is_range": a.is_range,
            },
        }

    def headline(self) -> str:
        a = self.answer
        if self.state == "complete" and a is not None:
            if a.is_range:
                return (
                    f"the first release failing {self.gate} is one of {', '.join(a.candidates)} "
                    f"(skipped versions hide which); {a.last_good} is the last that passed"
                )
            return f"{a.first_bad} is the first release failing {self.gate}; {a.last_good} is the last that passed"
        return f"no answer: {self.state}" + (f" ({self.note})" if self.note else "")

    def markdown(self) -> str:
        r = self.releases
        lines = [
            f"# Bisect of {self.slug}: gate `{self.gate}`, {r.dist} {r.versions[0]} (good) .. {r.versions[-1]} (bad)",
            "",
            f"**{self.headline()}.**",
            "",
            f"- command: `{self.command}`",
            f"- started {self.started}, finished {self.finished or '-'}; state: {self.state}",
            f"- releases searched ({len(r.versions)}, from {r.index}): {', '.join(r.versions)}",
        ]
        if r.excluded:
            lines.append("- left out: " + ", ".join(f"{v} ({why})" for v, why in r.excluded))
        lines += [
            "",
            "| step | version | role | verdict | figure | reason | time s | bundle | fixes |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for i, s in enumerate(self.steps, 1):
            reason, fixes = s.reason.replace("|", "\\|"), s.fixes.replace("|", "\\|")
            lines.append(
                f"| {i} | {s.version} | {s.role} | {s.verdict} | {s.figure or '-'} | {reason or '-'} "
                f"| {s.seconds:.1f} | {s.bundle or '-'} | {fixes or '-'} |"
            )
        return "\n".join(lines) + "\n"

    def write(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(out / "report.json", json.dumps(self.to_json(), indent=2) + "\n")
        atomic_write(out / "report.md", self.markdown())
