"""The vision gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/vision.py runs it)."""

from __future__ import annotations

from pydantic import Field

from cookbook.recipe.gates_spec.base import GateBase

RUN_ORDER = 80  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "An image request answered from the picture."


class VisionGate(GateBase):
    """An image request answered: a built-in picture (PNG, sent as a data: URL) and a question whose
    answer is in the picture."""

    requests: int = Field(2, ge=1, le=8, description="Requests, each with one of the built-in pictures.")
    max_tokens: int = Field(2048, ge=16, description="Completion budget per request (thinking plus answer).")
    min_correct_fraction: float = Field(
        1.0, ge=0.0, le=1.0, description="Pass when answers naming the picture's colour / requests >= this."
    )


SPEC = VisionGate
