"""The spec_acceptance gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/spec_acceptance.py runs it)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from cookbook.recipe.gates_spec.base import BUILTIN_PROMPTS, GateBase

RUN_ORDER = 60  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "Speculative decoding acceptance from /metrics counter deltas."


class SpecAcceptanceGate(GateBase):
    min_acceptance_rate: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Minimum of Δaccepted_tokens / Δdraft_tokens from vllm:spec_decode_* counters over the gate's requests.",
    )
    min_mean_acceptance_length: float = Field(
        1.0, ge=1.0, description="Minimum of 1 + Δaccepted_tokens / Δdrafts, in tokens per target forward pass."
    )
    prompts: Literal["gsm8k", "builtin:cookbook-tasks"] | None = Field(
        None,
        description="Where the natural-text prompts come from: 'gsm8k' (also when absent), the first `requests` GSM8K "
        "test questions under the data path (each with 'Explain step by step.'); 'builtin:cookbook-tasks', "
        "the 24 writing tasks that ship with the cookbook (descriptions, stories, explanations; no data path).",
    )
    requests: int = Field(
        8, ge=1, description="Natural-text requests sent to drive drafting: the first N of `prompts`."
    )
    max_tokens: int = Field(128, ge=8, description="Completion budget per request.")
    temperature: float | None = Field(
        None,
        ge=0.0,
        le=2.0,
        description="Sampling temperature of every request: the sampling the source document measured "
        "acceptance at (absent: 0, greedy; e.g. 0.8, a server's default sampling). Sent with each request "
        "and recorded in the bundle; `gates verify` refuses transcripts sent at another. (Absent rather "
        "than 0 by default, so that recipes verified before it existed keep their content hash.)",
    )
    top_p: float | None = Field(
        None, gt=0.0, le=1.0, description="top_p of every request, when the source states one (absent: not sent)."
    )

    @model_validator(mode="after")
    def _enough_builtin_prompts(self):
        have = BUILTIN_PROMPTS.get(self.prompts)
        if have is not None and self.requests > have:
            raise ValueError(f"requests {self.requests}: {self.prompts} holds {have} prompts; ask for at most {have}")
        return self


SPEC = SpecAcceptanceGate
