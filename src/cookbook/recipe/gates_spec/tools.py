"""The tools gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/tools.py runs it)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cookbook.recipe.gates_spec.base import GateBase

RUN_ORDER = 30  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "Tool calling and JSON-schema output, streamed and not, greedy and sampled."


ToolCase = Literal["required", "named", "auto", "none", "json_schema"]


class ToolsGate(GateBase):
    cases: list[ToolCase] = Field(
        default_factory=lambda: ["required", "named", "auto", "none", "json_schema"],
        min_length=1,
        description="tool_choice modes to test (required, named, auto, none) and a response_format json_schema case.",
    )
    stream: Literal["off", "on", "both"] = Field(
        "both",
        description="Run each case non-streamed, streamed, or both; with both, streamed arguments must equal non-streamed ones as parsed JSON (greedy only).",
    )
    sampling: Literal["greedy", "sampled", "both"] = Field(
        "both",
        description="greedy: temperature 0; sampled: temperature `sampled_temperature` (validity is checked, not equality).",
    )
    sampled_temperature: float = Field(0.7, gt=0.0, le=2.0, description="Temperature of sampled runs.")
    max_tokens: int = Field(256, ge=16, description="Completion budget per request.")
    min_passed_fraction: float = Field(
        1.0, ge=0.0, le=1.0, description="Pass when passed checks / all checks is at least this."
    )


SPEC = ToolsGate
