"""How a recipe declares its gates: which ones run and the thresholds each must meet.

A recipe's `gates:` block validates against `GatesSpec`. Every gate is optional; a recipe
with no gates is valid (and can never be verified by a gate it does not declare). Each
gate carries `calibrated_on`, naming the run that set its thresholds, so a threshold is
never a number without a source; `gates.calibrated_on` gives it to every gate that does
not set its own. Units are part of field names (_tokens, _s, _pct, _fraction, _tok_s).

GatesSpec's gate fields are the registry: their order is the order `cookbook gates run`
executes and prints them (cheap correctness gates first, load and speed last, so a broken
server fails fast), and GATE_NAMES is derived from them. To add a gate:
  1. here, a `<Name>Gate(GateBase)` model with its thresholds, and a field
     `<name>: Optional[<Name>Gate]` in GatesSpec, in run order;
  2. src/cookbook/gates/<name>.py with `async def run(ctx, cfg)`, `verdict(measured, items, cfg)`
     and `recompute(recorded, cfg)` (the figures again from a bundle, for `gates verify`); the
     runner and the evidence re-check find it through cookbook.gates.registry, and
     tests/gates/test_registry.py checks every gate has all three;
  3. `make docs` (the schema and pages list the new keys).

Only pydantic is imported here: the recipe model imports this module on every command.
"""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Gate data that ships inside the package (cookbook.gates.gatedata; a test checks these
# names against it). Kept here as names only: this module imports nothing but pydantic.
BUILTIN_HAYSTACKS: tuple[str, ...] = ("builtin:cookbook-prose",)
BUILTIN_PROMPTS: dict[str, int] = {"builtin:cookbook-tasks": 24}  # name -> how many prompts it holds


def _calibrated_on_not_required(schema: dict, cls) -> None:
    """In the JSON schema a gate may leave out calibrated_on (gates.calibrated_on fills it
    before validation); the model still refuses a gate with neither."""
    required = schema.get("required", [])
    if "calibrated_on" in required:
        required.remove("calibrated_on")
        if not required:
            del schema["required"]


class GateBase(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_calibrated_on_not_required)

    calibrated_on: str = Field(
        min_length=1,
        description=(
            "Which run set this gate's thresholds: an evidence bundle path, a hardware + "
            "engine + date note, or 'reported: <source>'. Say 'uncalibrated' when a "
            "threshold is a placeholder. Default: gates.calibrated_on."
        ),
    )
    timeout_s: float = Field(
        600.0, gt=0, description="Wall-clock limit for the whole gate; past it the gate fails as timed out."
    )
    max_concurrent_requests: int = Field(
        4, ge=1, le=256, description="Bound on requests this gate has in flight at once."
    )
    seed: int = Field(
        1234, description="Seed for the gate's random choices (codes, depths, prefixes) and sampled requests."
    )
    request_extra: dict[str, Any] = Field(
        default_factory=dict,
        description="Fields merged into every request body of this gate, e.g. {chat_template_kwargs: "
        "{enable_thinking: false}} or {reasoning_effort: low}; recorded in the transcripts.",
    )


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


ToolCase = Literal["required", "named", "auto", "none", "json_schema"]


class ToolsGate(GateBase):
    cases: list[ToolCase] = Field(
        default_factory=lambda: ["required", "named", "auto", "none", "json_schema"],
        min_length=1,
        description="tool_choice modes to test (required, named, auto, none) and a response_format json_schema case.",
    )
    stream: Literal["off", "on", "both"] = Field(
        "both",
        description="Run each case non-streamed, streamed, or both; with both, streamed arguments must equal non-streamed ones as parsed JSON (greedy only).",
    )
    sampling: Literal["greedy", "sampled", "both"] = Field(
        "both",
        description="greedy: temperature 0; sampled: temperature `sampled_temperature` (validity is checked, not equality).",
    )
    sampled_temperature: float = Field(0.7, gt=0.0, le=2.0, description="Temperature of sampled runs.")
    max_tokens: int = Field(256, ge=16, description="Completion budget per request.")
    min_passed_fraction: float = Field(
        1.0, ge=0.0, le=1.0, description="Pass when passed checks / all checks is at least this."
    )


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


class StressGate(GateBase):
    decodes: int = Field(4, ge=1, description="Streaming decodes kept running while the long prompts prefill.")
    decode_max_tokens: int = Field(
        128, ge=8, description="Tokens each decode generates (ignore_eos, so the count is fixed)."
    )
    prefill_tokens: list[int] = Field(
        default_factory=lambda: [2048],
        min_length=1,
        description="Lengths of the long prompts sent once the decodes are streaming, in tokens; one request per entry.",
    )
    max_decode_gap_s: float = Field(
        gt=0,
        description="Pass when the largest gap between token-carrying chunks of any decode (usage deltas > 0) is at most this.",
    )
    needles: int | None = Field(
        None,
        ge=1,
        le=8,
        description="Random 7-digit codes hidden in each long prompt (spread through it); the long prompts then "
        "ask for them, and every code must be found in the answer. Absent: the long prompts are plain prose.",
    )


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


class VisionGate(GateBase):
    """An image request answered: a built-in picture (PNG, sent as a data: URL) and a question whose
    answer is in the picture."""

    requests: int = Field(2, ge=1, le=8, description="Requests, each with one of the built-in pictures.")
    max_tokens: int = Field(2048, ge=16, description="Completion budget per request (thinking plus answer).")
    min_correct_fraction: float = Field(
        1.0, ge=0.0, le=1.0, description="Pass when answers naming the picture's colour / requests >= this."
    )


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


class GatesSpec(BaseModel):
    """The gates a recipe must pass to be verified; absent gates are not run."""

    # The gate fields below, in order, are the registry of gates (see the module docstring).
    model_config = ConfigDict(extra="forbid")

    calibrated_on: str | None = Field(
        None,
        min_length=1,
        exclude=True,
        description="calibrated_on of every gate here that does not set its own (resolved into "
        "each gate, so it is not kept beside them).",
    )

    benchmark_only: str | None = Field(
        None,
        min_length=1,
        description="Set on a recipe that is a benchmark only (e.g. vLLM's dummy weights, so no answer "
        "means anything): why. Its gates measure and are recorded, but it is shown as 'benchmark' and "
        "can never be verified. A recipe without it must declare at least one gate (lint R023).",
    )

    greedy: GreedyGate | None = Field(
        None, description="Determinism: fixed prompts at temperature 0 give identical text."
    )
    logprobs: LogprobsGate | None = Field(
        None, description="Logprobs: top-K present for every token, finite, not clamped."
    )
    tools: ToolsGate | None = Field(
        None, description="Tool calling and JSON-schema output, streamed and not, greedy and sampled."
    )
    needles: NeedlesGate | None = Field(
        None, description="Long-context retrieval of random codes hidden in natural prose."
    )
    gsm8k: Gsm8kGate | None = Field(
        None, description="Arithmetic reasoning accuracy on the first N GSM8K test problems."
    )
    spec_acceptance: SpecAcceptanceGate | None = Field(
        None, description="Speculative decoding acceptance from /metrics counter deltas."
    )
    reasoning_split: ReasoningSplitGate | None = Field(
        None, description="The reasoning parser leaves content non-null within a 2,048-token budget."
    )
    vision: VisionGate | None = Field(None, description="An image request answered from the picture.")
    golden: GoldenGate | None = Field(
        None, description="Lossless: teacher-forced top-1 tokens over a long text equal a recorded golden."
    )
    stress: StressGate | None = Field(None, description="Decodes keep flowing while long prompts prefill.")
    decode: DecodeGate | None = Field(
        None, description="Single-stream decode rate from non-streamed usage, at short and long context."
    )
    speed: SpeedGate | None = Field(None, description="Decode speed, uncached TTFT, and a concurrency sweep.")

    @model_validator(mode="before")
    @classmethod
    def _default_calibrated_on(cls, data: Any) -> Any:
        default = data.get("calibrated_on") if isinstance(data, dict) else None
        if not isinstance(default, str) or not default:
            return data
        return {
            k: (
                {"calibrated_on": default, **v}
                if k in GATE_NAMES and isinstance(v, dict) and "calibrated_on" not in v
                else v
            )
            for k, v in data.items()
        }

    def declared(self) -> list[str]:
        """Names of declared gates, in run order."""
        return [name for name in GATE_NAMES if getattr(self, name) is not None]


def _is_gate(annotation: Any) -> bool:
    return any(isinstance(a, type) and issubclass(a, GateBase) for a in typing.get_args(annotation))


# The gates, in run order: GatesSpec's gate fields (the one list to edit is GatesSpec).
GATE_NAMES: tuple[str, ...] = tuple(
    name for name, field in GatesSpec.model_fields.items() if _is_gate(field.annotation)
)
