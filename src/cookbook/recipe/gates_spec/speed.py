"""The speed gate's thresholds in a recipe's `gates:` block (src/cookbook/gates/speed.py runs it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cookbook.recipe.gates_spec.base import BUILTIN_PROMPTS, GateBase

RUN_ORDER = 120  # its place in `gates run` (cookbook.recipe.gates_spec orders the gates by it)
DESCRIPTION = "Decode speed, uncached TTFT, and a concurrency sweep."


CHAT_PROMPT_SETS = ("gsm8k",)  # chat workload question sets read from the data path (besides BUILTIN_PROMPTS)


class SpeedChat(BaseModel):
    """The speed gate's second workload: natural questions through /v1/chat/completions, sampled at
    the recipe's own default sampling, at the sweep's concurrencies and request count. The greedy
    prose workload flatters n-gram speculation (a small base model repeats itself under greedy
    decoding, and the drafts come from that repetition); this one measures a chat user's load."""

    model_config = ConfigDict(extra="forbid")

    prompts: str = Field(
        "builtin:cookbook-tasks",
        description="The questions: builtin:cookbook-tasks (the 24 built-in writing requests, shipped with the "
        "cookbook) or gsm8k (GSM8K's test questions from the data path, zero-shot, no few-shot examples). "
        "Each request is one user message; a set smaller than the sweep recurs in a seeded order.",
    )
    temperature: float = Field(
        0.8, ge=0.0, le=2.0, description="The recipe's default sampling temperature, sent with every request."
    )
    top_p: float = Field(0.95, gt=0.0, le=1.0, description="The recipe's default top_p, sent with every request.")
    max_tokens: int = Field(
        128, ge=8, description="Completion tokens per request (ignore_eos, so every server does the same work)."
    )
    min_output_throughput_by_concurrency: list[tuple[int, float]] | None = Field(
        None,
        description="[concurrency, minimum output_throughput tok/s] pairs for the chat workload, each "
        "concurrency one of the gate's sweep_concurrencies.",
    )

    @model_validator(mode="after")
    def _known_prompts(self):
        if self.prompts not in BUILTIN_PROMPTS and self.prompts not in CHAT_PROMPT_SETS:
            raise ValueError(
                f"chat prompts {self.prompts!r}: one of {sorted(BUILTIN_PROMPTS) + list(CHAT_PROMPT_SETS)}"
            )
        if any(v <= 0 for _, v in self.min_output_throughput_by_concurrency or []):
            raise ValueError("chat min_output_throughput_by_concurrency values must be above 0")
        return self


class SpeedGate(GateBase):
    """A serving benchmark in `vllm bench serve`'s terms: at each sweep concurrency, sweep_requests
    streamed completions of natural, varied prompts (passages of the built-in prose, each with a
    unique suffix), sweep_max_tokens tokens each (ignore_eos, greedy); then uncached TTFT probes."""

    min_output_throughput_1_stream: float | None = Field(
        None,
        gt=0,
        description="Minimum output_throughput (completion tokens / level duration, tok/s) at concurrency 1.",
    )
    min_output_throughput_peak: float | None = Field(
        None,
        gt=0,
        description="Minimum output_throughput (tok/s) at the largest sweep concurrency.",
    )
    min_output_throughput_by_concurrency: list[tuple[int, float]] | None = Field(
        None,
        description="[concurrency, minimum output_throughput tok/s] pairs, each concurrency one of "
        "sweep_concurrencies: e.g. a document's throughput-by-concurrency table (a list, so a recipe that "
        "extends another replaces it whole).",
    )
    max_ttft_2k_s: float | None = Field(
        None,
        gt=0,
        description="Maximum time to first token, client side, of an uncached 2048-token prompt (random prefix defeats the prefix cache).",
    )
    max_ttft_8k_s: float | None = Field(
        None, gt=0, description="Maximum time to first token of an uncached 8192-token prompt."
    )
    ttft_prompts_tokens: list[int] = Field(
        default_factory=lambda: [2048, 8192],
        description="Prompt lengths whose TTFT is measured; must include 2048 / 8192 when their threshold is set.",
    )
    sweep_concurrencies: list[int] = Field(
        default_factory=lambda: [1, 4, 16],
        description="Concurrency levels (vllm bench --max-concurrency); each sends sweep_requests requests.",
    )
    sweep_requests: int = Field(
        32,
        ge=1,
        description="Requests per level (vllm bench --num-prompts); at least the largest concurrency.",
    )
    sweep_max_tokens: int = Field(
        128, ge=8, description="Completion tokens per request (ignore_eos): long enough to reach steady decode."
    )
    passage_sentences: int = Field(
        8, ge=1, description="Sentences of the built-in prose in each prompt's passage (before its unique suffix)."
    )
    beyond_max_num_seqs: str | None = Field(
        None,
        min_length=1,
        description="Set only when a sweep level exceeds the concurrency the launch block admits "
        "(max_num_seqs x data_parallel_size) because the source measured it that way: quote the source. "
        "Without it lint refuses such a level (R028): the extra requests would only queue.",
    )
    chat: SpeedChat | None = Field(
        None,
        description="The chat workload, measured after the greedy sweep at the same concurrencies and request "
        "count, its figures under measured.chat with the sweep's names. Off unless set: a recipe verified "
        "before it existed stays valid.",
    )

    @model_validator(mode="after")
    def _ttft_lengths(self):
        for limit, n in ((self.max_ttft_2k_s, 2048), (self.max_ttft_8k_s, 8192)):
            if limit is not None and n not in self.ttft_prompts_tokens:
                raise ValueError(f"a TTFT threshold for {n} tokens is set but {n} is not in ttft_prompts_tokens")
        if not self.sweep_concurrencies or any(c < 1 for c in self.sweep_concurrencies):
            raise ValueError("sweep_concurrencies must be positive")
        if self.sweep_requests < max(self.sweep_concurrencies):
            raise ValueError("sweep_requests must be at least the largest sweep concurrency")
        bars = dict(self.min_output_throughput_by_concurrency or [])
        extra = sorted(set(bars) - set(self.sweep_concurrencies))
        if extra:
            raise ValueError(f"min_output_throughput_by_concurrency names {extra}, not in sweep_concurrencies")
        if any(v <= 0 for v in bars.values()):
            raise ValueError("min_output_throughput_by_concurrency values must be above 0")
        chat_extra = (
            sorted(set(dict(self.chat.min_output_throughput_by_concurrency or [])) - set(self.sweep_concurrencies))
            if self.chat
            else []
        )
        if chat_extra:
            raise ValueError(
                f"chat.min_output_throughput_by_concurrency names {chat_extra}, not in sweep_concurrencies"
            )
        return self


SPEC = SpeedGate
