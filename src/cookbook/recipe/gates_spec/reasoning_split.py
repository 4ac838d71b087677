"""The reasoning_split gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/reasoning_split.py runs it)."""

from __future__ import annotations

from pydantic import Field

from cookbook.recipe.gates_spec.base import GateBase

RUN_ORDER = 70  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "The reasoning parser leaves content non-null within a 2,048-token budget."


class ReasoningSplitGate(GateBase):
    """The reasoning parser splits the answer from the thinking: with the recipe's parser and a
    2,048-token budget, `content` is not null (a wrong parser returns the whole reply as reasoning)."""

    requests: int = Field(4, ge=1, le=24, description="Chat requests: the first N built-in writing tasks.")
    max_tokens: int = Field(2048, ge=16, description="Completion budget (thinking plus answer) per request.")
    reasoning_field: str = Field(
        "reasoning", min_length=1, description="Message field holding the reasoning (vLLM >= 0.11: 'reasoning')."
    )
    require_reasoning: bool = Field(
        True,
        description="Also require a non-empty reasoning field (the model thinks, and the parser found it); "
        "false for a model that does not reason.",
    )
    min_content_fraction: float = Field(
        1.0, ge=0.0, le=1.0, description="Pass when requests whose content is a non-empty string / requests >= this."
    )


SPEC = ReasoningSplitGate
