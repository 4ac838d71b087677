"""The binary search of `cookbook bisect`, free of engines and servers: an ordered list of
versions and a probe (version -> pass, fail or skip) in; the first failing version, or the
range that skips leave, and every step out.

Like `git bisect`: the two ends are probed first and must hold (the oldest passes, the newest
fails), or the search stops. A skipped version (its engine does not install, its server does
not start) is stepped around: the next probe is the untested version nearest the middle. When
only skipped versions lie between the last pass and the first fail, the answer is that range.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Literal

from cookbook.errors import FAILED, CookbookError

Verdict = Literal["pass", "fail", "skip"]


@dataclass
class Outcome:
    """What one probe found: its verdict, the gate's headline figure, and why (for a skip or a fail)."""

    verdict: Verdict
    figure: str = ""
    reason: str = ""
    bundle: str | None = None
    fixes: str = ""  # which fixes the step's engine carried


@dataclass
class Step:
    version: str
    role: Literal["good end", "bad end", "search"]
    verdict: Verdict
    figure: str
    reason: str
    bundle: str | None
    seconds: float
    fixes: str = ""

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Answer:
    """first_bad: the first failing version when it is known; candidates: the versions it may be
    (one when known; the skipped ones and the first fail when skips hide it)."""

    first_bad: str | None
    last_good: str
    candidates: list[str]

    @property
    def is_range(self) -> bool:
        return len(self.candidates) > 1


SKIPPED_END_HELP = (
    "the gate never ran on {version}: make it run there first (`cookbook upgrade {slug} --engine {version} --dry-run` "
    "says which fixes no longer apply), or pick another end"
)


class EndsDoNotHold(CookbookError):
    """The good end does not pass, or the bad end does not fail: there is nothing to search."""

    exit_code = FAILED


@dataclass
class Bisection:
    """Run with run(); steps fill in as probes finish, so an interrupted search keeps the finished ones."""

    versions: list[str]
    probe: Callable[[str], Outcome]
    steps: list[Step] = field(default_factory=list)
    on_step: Callable[[Step], None] | None = None
    slug: str = "SLUG"  # for the help line of a refusal

    def __post_init__(self) -> None:
        if len(self.versions) < 2:
            raise CookbookError(
                f"a bisection needs two versions at least, got {self.versions}",
                help="give a --good release older than the --bad one",
            )
        if len(set(self.versions)) != len(self.versions):
            raise CookbookError(f"versions repeat in {self.versions}")

    def _probe(self, index: int, role) -> Verdict:
        version = self.versions[index]
        t0 = time.monotonic()
        outcome = self.probe(version)
        step = Step(
            version=version,
            role=role,
            verdict=outcome.verdict,
            figure=outcome.figure,
            reason=outcome.reason,
            bundle=outcome.bundle,
            seconds=round(time.monotonic() - t0, 1),
            fixes=outcome.fixes,
        )
        self.steps.append(step)
        if self.on_step:
            self.on_step(step)
        return outcome.verdict

    def run(self) -> Answer:
        good, bad = self.versions[0], self.versions[-1]
        verdict = self._probe(0, "good end")
        if verdict != "pass":
            raise EndsDoNotHold(
                f"the good end {good} does not pass (it was {verdict}: {self.steps[-1].reason or 'see its bundle'})",
                help=SKIPPED_END_HELP.format(slug=self.slug, version=good)
                if verdict == "skip"
                else "pick an older --good release where the gate passes (the bundle says why this one did not)",
            )
        verdict = self._probe(len(self.versions) - 1, "bad end")
        if verdict != "fail":
            raise EndsDoNotHold(
                f"the bad end {bad} does not fail (it was {verdict}"
                + (f": {self.steps[-1].reason}" if self.steps[-1].reason else "")
                + ")",
                help=SKIPPED_END_HELP.format(slug=self.slug, version=bad)
                if verdict == "skip"
                else "pick a --bad release where the gate fails, or a different --gate",
            )
        lo, hi = 0, len(self.versions) - 1  # lo passed, hi failed
        skipped: set[int] = set()
        while True:
            untested = [i for i in range(lo + 1, hi) if i not in skipped]
            if not untested:
                break
            middle = (lo + hi) / 2
            index = min(untested, key=lambda i: (abs(i - middle), i))
            verdict = self._probe(index, "search")
            if verdict == "pass":
                lo = index
            elif verdict == "fail":
                hi = index
            else:
                skipped.add(index)
        hidden = [self.versions[i] for i in range(lo + 1, hi)]  # all skipped by now
        return Answer(
            first_bad=None if hidden else self.versions[hi],
            last_good=self.versions[lo],
            candidates=hidden + [self.versions[hi]],
        )
