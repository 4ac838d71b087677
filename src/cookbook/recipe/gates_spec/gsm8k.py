"""The gsm8k gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/gsm8k.py runs it)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from cookbook.recipe.gates_spec.base import GateBase

RUN_ORDER = 50  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "Arithmetic reasoning accuracy on the first N GSM8K test problems."


class Gsm8kGate(GateBase):
    n: int = Field(50, ge=1, le=1319, description="Number of test problems: the first N of GSM8K test.jsonl.")
    shots: int = Field(
        5, ge=0, le=20, description="Few-shot examples: the first K of GSM8K train.jsonl, as 'Question:/Answer:' pairs."
    )
    mode: Literal["chat", "completion"] = Field(
        "chat",
        description="chat: /v1/chat/completions with the shots as prior turns; completion: /v1/completions with one text prompt.",
    )
    extraction: Literal["strict", "flexible"] = Field(
        "flexible",
        description="Which extraction the threshold applies to; both are measured. strict: first '#### N'; flexible: last number in the answer.",
    )
    max_tokens: int = Field(
        256,
        ge=16,
        description="Completion budget per problem; answers ending with finish_reason 'length' are counted and scored as they are.",
    )
    stop: list[str] = Field(default_factory=lambda: ["Question:"], description="Stop strings sent with each request.")
    min_correct_fraction: float = Field(
        ge=0.0, le=1.0, description="Pass when correct / n (with the chosen extraction) is at least this."
    )
    reasoning_field: str | None = Field(
        "reasoning",
        description="Message field holding separate reasoning (vLLM >= 0.11: 'reasoning'; older: 'reasoning_content'). Only content is scored; reasoning is recorded. null: the model does not reason.",
    )
    max_truncated_fraction: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="If set, fail when answers with finish_reason 'length' / n exceed this (catches reasoning that eats the budget).",
    )
    reasoning_effort: Literal["low", "medium", "high"] | None = Field(
        None,
        description="Sent as chat_template_kwargs.reasoning_effort with every problem (the server's default "
        "otherwise, e.g. --default-chat-template-kwargs); recorded in the transcript.",
    )

    @model_validator(mode="after")
    def _effort_needs_chat(self):
        if self.reasoning_effort is not None and self.mode != "chat":
            raise ValueError("reasoning_effort is sent through the chat template; it needs mode 'chat'")
        return self


SPEC = Gsm8kGate
