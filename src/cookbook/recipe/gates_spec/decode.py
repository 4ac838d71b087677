"""The decode gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/decode.py runs it)."""

from __future__ import annotations

from pydantic import Field, model_validator

from cookbook.recipe.gates_spec.base import GateBase

RUN_ORDER = 110  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "Single-stream decode rate from non-streamed usage, at short and long context."


class DecodeGate(GateBase):
    """Single-stream decode rate counted from non-streamed `usage` (under speculative decoding one SSE
    chunk carries several accepted tokens, so counting chunks undercounts by about the acceptance
    factor). At each context length the prompt is sent once to fill the prefix cache, then timed."""

    contexts_tokens: list[int] = Field(
        default_factory=lambda: [2048], min_length=1, description="Prompt lengths, tokens (server's /tokenize)."
    )
    max_tokens: int = Field(256, ge=8, description="Completion tokens per timed request (ignore_eos).")
    min_tok_s: list[tuple[int, float]] | None = Field(
        None,
        description="[context tokens, minimum usage.completion_tokens / elapsed tok/s] pairs, each context one of "
        "contexts_tokens (a list, so a recipe that extends another replaces it whole).",
    )
    min_prefill_tok_s: list[tuple[int, float]] | None = Field(
        None,
        description="[context tokens, minimum fresh-prefill tok/s] pairs, each context one of contexts_tokens: "
        "the prompt's tokens / the client time of its first, uncached request (max_tokens 1), e.g. a document's "
        "'fresh prefill ... at 115-123K'. Absent: prefill is not judged.",
    )

    min_prefix_cache_speedup: list[tuple[int, float]] | None = Field(
        None,
        description="[context tokens, minimum ratio] pairs, each context one of contexts_tokens: the first, "
        "uncached request's time over the time of the same prompt sent again at once (prefix-cached), both "
        "max_tokens 1, e.g. a document's '11.4x TTFT speedup on a warm 12k-token prompt'. Absent: not judged "
        "(and the extra request is not sent).",
    )

    @model_validator(mode="after")
    def _prefill_bars_measured(self):
        for name in ("min_prefill_tok_s", "min_prefix_cache_speedup"):
            pairs = getattr(self, name) or []
            extra = sorted(set(dict(pairs)) - set(self.contexts_tokens))
            if extra:
                raise ValueError(f"{name} names {extra}, not in contexts_tokens")
            if any(v <= 0 for _, v in pairs):
                raise ValueError(f"{name} values must be above 0")
        return self

    @model_validator(mode="after")
    def _bars_measured(self):
        bars = dict(self.min_tok_s or [])
        extra = sorted(set(bars) - set(self.contexts_tokens))
        if extra:
            raise ValueError(f"min_tok_s names {extra}, not in contexts_tokens")
        if any(v <= 0 for v in bars.values()) or any(n < 64 for n in self.contexts_tokens):
            raise ValueError("min_tok_s values must be above 0 and contexts_tokens at least 64")
        return self


SPEC = DecodeGate
