"""The stress gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/stress.py runs it)."""

from __future__ import annotations

from pydantic import Field

from cookbook.recipe.gates_spec.base import GateBase

RUN_ORDER = 100  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "Decodes keep flowing while long prompts prefill."


class StressGate(GateBase):
    decodes: int = Field(4, ge=1, description="Streaming decodes kept running while the long prompts prefill.")
    decode_max_tokens: int = Field(
        128, ge=8, description="Tokens each decode generates (ignore_eos, so the count is fixed)."
    )
    prefill_tokens: list[int] = Field(
        default_factory=lambda: [2048],
        min_length=1,
        description="Lengths of the long prompts sent once the decodes are streaming, in tokens; one request per entry.",
    )
    max_decode_gap_s: float = Field(
        gt=0,
        description="Pass when the largest gap between token-carrying chunks of any decode (usage deltas > 0) is at most this.",
    )
    needles: int | None = Field(
        None,
        ge=1,
        le=8,
        description="Random 7-digit codes hidden in each long prompt (spread through it); the long prompts then "
        "ask for them, and every code must be found in the answer. Absent: the long prompts are plain prose.",
    )


SPEC = StressGate
