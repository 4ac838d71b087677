"""The greedy gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/greedy.py runs it)."""

from __future__ import annotations

from pydantic import Field

from cookbook.recipe.gates_spec.base import GateBase

RUN_ORDER = 10  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "Determinism: fixed prompts at temperature 0 give identical text."


class GreedyGate(GateBase):
    prompts: list[str] = Field(
        default_factory=lambda: [
            "Write the numbers from one to twenty in words, separated by commas.",
            "Explain in three sentences why the sky is blue.",
            "List five animals that live in the ocean.",
        ],
        min_length=1,
        description="Fixed prompts, each run twice at temperature 0 with the same batch shape; outputs must be identical.",
    )
    max_tokens: int = Field(64, ge=1, description="Tokens per completion.")
    repeats: int = Field(2, ge=2, description="Runs per prompt that must agree.")


SPEC = GreedyGate
