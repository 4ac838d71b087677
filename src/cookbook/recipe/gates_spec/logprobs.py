"""The logprobs gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/logprobs.py runs it)."""

from __future__ import annotations

from pydantic import Field

from cookbook.recipe.gates_spec.base import GateBase

RUN_ORDER = 20  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "Logprobs: top-K present for every token, finite, not clamped."


class LogprobsGate(GateBase):
    requests: int = Field(4, ge=1, description="Sampled chat requests with logprobs.")
    top_logprobs: int = Field(
        5, ge=1, le=20, description="top_logprobs asked for; every generated token must return exactly this many."
    )
    max_tokens: int = Field(16, ge=1, description="Tokens generated per request.")
    temperature: float = Field(
        1.0, gt=0.0, le=2.0, description="Sampling temperature (sampled, so rare tokens appear)."
    )
    clamp_sentinel: float = Field(
        -9999.0,
        description="Value vLLM clamps -inf logprobs to; a logprob at or below it counts as clamped (a failure).",
    )


SPEC = LogprobsGate
