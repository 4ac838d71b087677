"""The golden gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/golden.py runs it)."""

from __future__ import annotations

from pydantic import Field

from cookbook.recipe.gates_spec.base import GateBase

RUN_ORDER = 90  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "Lossless: teacher-forced top-1 tokens over a long text equal a recorded golden."


class GoldenGate(GateBase):
    """Lossless serving: a temperature-0, teacher-forced pass over a long text (prompt_logprobs), its
    top-1 token at every position compared with a golden recorded from the same checkpoint."""

    length_tokens: int = Field(65536, ge=256, description="Tokens of the teacher-forced text (built-in prose).")
    golden: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.json$",
        description="The recorded golden: a file name under the data path's golden/ folder. Every run writes its "
        "own as golden.json in the bundle; record it once on a reference server (e.g. no speculation) and copy it there.",
    )
    golden_sha256: str | None = Field(
        None,
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="sha256 of the golden file (sha256:<64 hex>): a run or a bundle compared with any other golden "
        "fails. Required for the gate to pass: without it the golden is whatever file the runner supplies.",
    )
    min_top1_agreement: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="Pass when positions whose top-1 token equals the golden's / positions >= this.",
    )
    max_mean_abs_logprob_diff: float = Field(
        0.05, ge=0.0, description="Pass when the mean |logprob - golden logprob| of the text's own tokens is <= this."
    )


SPEC = GoldenGate
