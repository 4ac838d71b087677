"""What one gate produced: status, measured values, thresholds and the formula of each metric."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["passed", "failed", "skipped"]


@dataclass
class GateResult:
    name: str
    status: Status = "failed"
    reason: str = ""
    measured: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    formulas: dict[str, str] = field(default_factory=dict)
    # Per-item records (one per prompt / case); kept even when the gate faults midway.
    items: list[dict[str, Any]] = field(default_factory=list)
    # Set when the gate did not finish: "timeout", "server_down", "error".
    fault: str | None = None
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def judge(self, checks: list[tuple[bool, str]]) -> GateResult:
        """Pass only when every (ok, what-failed) check holds; the reason lists the failures."""
        failures = [msg for ok, msg in checks if not ok]
        if not checks:
            self.status, self.reason = "failed", "no checks ran"
        elif failures:
            self.status, self.reason = "failed", "; ".join(failures)
        else:
            self.status, self.reason = "passed", "all checks met"
        return self


class GateFailure(Exception):
    """A gate cannot run or complete for a reason the user must act on (message says which)."""
