"""The needles gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/needles.py runs it)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from cookbook.recipe.gates_spec.base import BUILTIN_HAYSTACKS, GateBase

RUN_ORDER = 40  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "Long-context retrieval of random codes hidden in natural prose."


class NeedlesGate(GateBase):
    lengths_tokens: list[int] = Field(
        min_length=1,
        description="Prompt lengths to test, in tokens of the served model's tokenizer (counted with the server's /tokenize).",
    )
    depths_pct: list[float] = Field(
        default_factory=lambda: [10.0, 50.0, 90.0],
        min_length=1,
        description="Where each needle goes in the haystack, in percent of its length (0 = start, 100 = end); inserted at a sentence boundary.",
    )
    codes_per_prompt: int = Field(
        1,
        ge=1,
        le=16,
        description="Random 7-digit codes hidden per prompt; the first at the depth, the rest spaced evenly after it.",
    )
    fillers: list[str] = Field(
        default_factory=lambda: ["moby-dick.txt"],
        min_length=1,
        description="Haystack texts (natural prose), one prompt set per filler: 'builtin:cookbook-prose' is the "
        "prose that ships with the cookbook (needs no data path; about 16K Gemma 3 tokens); any other "
        "name is a file under the data path's haystack/ folder, e.g. moby-dick.txt.",
    )
    codes_at_depths: bool | None = Field(
        None,
        description="true: one prompt per filler and length holding one code at each of depths_pct (e.g. 3 codes at "
        "10/50/90%); needs codes_per_prompt equal to the number of depths. Default: a prompt per depth, its "
        "first code at the depth and the rest spread after it.",
    )
    max_tokens: int = Field(48, ge=8, description="Completion budget for the answer (the codes and little else).")
    mode: Literal["chat", "completion"] = Field(
        "chat",
        description=(
            "chat: the haystack and a question in one user turn (/v1/chat/completions). completion: for "
            "base models, the haystack then 'The special magic number for the KEY is' "
            "(/v1/completions, stop at '.' or newline); needs codes_per_prompt 1."
        ),
    )
    window_fill_fraction: float | None = Field(
        None,
        gt=0.5,
        le=1.0,
        description="If set, one more prompt per filler and depth, sized to this fraction of the served "
        "max_model_len (read from /v1/models) less max_tokens: the capability near the end of the served "
        "window. Long prompts are built from the prose in passes, never from one word repeated.",
    )
    min_found_fraction: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="Pass when found codes / hidden codes over all prompts is at least this (case-insensitive substring "
        "match; a response that echoes 8+ consecutive words of the haystack finds none).",
    )

    @model_validator(mode="after")
    def _codes_at_depths(self):
        if self.codes_at_depths and self.codes_per_prompt != len(self.depths_pct):
            raise ValueError(
                f"codes_at_depths puts one code at each of {len(self.depths_pct)} depths; "
                f"set codes_per_prompt: {len(self.depths_pct)}"
            )
        return self

    @model_validator(mode="after")
    def _completion_one_code(self):
        if self.mode == "completion" and self.codes_per_prompt != 1:
            raise ValueError("mode 'completion' asks for one code per prompt; set codes_per_prompt: 1")
        return self

    @model_validator(mode="after")
    def _known_builtin_fillers(self):
        bad = [f for f in self.fillers if f.startswith("builtin:") and f not in BUILTIN_HAYSTACKS]
        if bad:
            raise ValueError(f"unknown built-in filler {bad}; built-in haystacks: {list(BUILTIN_HAYSTACKS)}")
        return self

    @model_validator(mode="after")
    def _depths_in_range(self):
        bad = [d for d in self.depths_pct if not 0.0 <= d <= 100.0]
        if bad:
            raise ValueError(f"depths_pct must lie in 0..100; got {bad}")
        if any(n < 64 for n in self.lengths_tokens):
            raise ValueError("lengths_tokens must each be at least 64")
        return self


SPEC = NeedlesGate
