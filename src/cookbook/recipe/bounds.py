"""The bounds every command applies to a resolved recipe (recipe files and --set alike): what the
schema cannot say on its own, checked once in resolution so plan, launch, serve, show and fetch
refuse the same values with the same words (R006).

- hardware.platform in the platform catalogue;
- every integer within int64 (a 20-digit layer count, 2**80 KV heads);
- serve.args.tensor_parallel_size a divisor of model.architecture.attention_heads;
- serve.args.max_model_len at most model.architecture.native_context_tokens (unless the recipe's
  env sets VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, vLLM's own switch for a longer window);
- env.VLLM_CPU_KVCACHE_SPACE a number of GiB above 0 and at most MAX_KV_SPACE_GIB (0 lets vLLM
  pick its own default, which no plan can know);
- a JSON serve flag (speculative_config, compilation_config, ...) given as text must be a JSON
  object, read by the one bounded JSON reader (cookbook.untrusted.loads_json).
"""

from __future__ import annotations

import math
from typing import Any

from cookbook import platforms
from cookbook.recipe import errors as E
from cookbook.recipe import flags
from cookbook.untrusted import loads_json, printable

INT64 = 2**63 - 1
MAX_KV_SPACE_GIB = 1 << 20  # a PiB of host memory for the KV cache: past any machine
SKIP = ("verified", "reported", "known_issues")  # prose and evidence, not settings


def _ints(value: Any, key: str):
    stack = [(value, key)]
    while stack:
        v, k = stack.pop()
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            yield k, v
        elif isinstance(v, dict):
            stack.extend((x, f"{k}.{n}" if k else str(n)) for n, x in v.items() if not (not k and n in SKIP))
        elif isinstance(v, list):
            stack.extend((x, f"{k}.{i}") for i, x in enumerate(v))


def _value(node: Any) -> Any:
    return node.get("value") if isinstance(node, dict) and "value" in node else node


def check(data: dict, locate) -> list[E.Diagnostic]:
    out: list[E.Diagnostic] = []

    def diag(key: str, problem: str, help: str) -> None:
        file, line, col = locate(key)
        out.append(E.Diagnostic(E.BAD_VALUE, key, problem, help, file, line, col))

    for key, v in _ints(data, ""):
        if abs(v) > INT64:
            diag(key, f"{key} is an integer of {len(str(abs(v)))} digits, beyond int64", "give a realistic value")
    hardware = data.get("hardware") if isinstance(data.get("hardware"), dict) else {}
    platform = hardware.get("platform")
    if isinstance(platform, str) and platform not in platforms.CATALOGUE:
        diag(
            "hardware.platform",
            f"unknown platform {printable(platform[:40])!r}",
            "platforms: " + ", ".join(sorted(platforms.CATALOGUE)),
        )
    serve = data.get("serve") if isinstance(data.get("serve"), dict) else {}
    args = serve.get("args") if isinstance(serve.get("args"), dict) else {}
    env = data.get("env") if isinstance(data.get("env"), dict) else {}
    arch = ((data.get("model") or {}).get("architecture") or {}) if isinstance(data.get("model"), dict) else {}
    native = _value(arch.get("native_context_tokens")) if isinstance(arch, dict) else None
    length = _value(args.get("max_model_len"))
    long_ok = str(_value(env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN"))) in ("1", "true", "True")
    if isinstance(native, int) and isinstance(length, int) and not isinstance(length, bool) and length > native:
        if not long_ok:
            diag(
                "serve.args.max_model_len",
                f"max_model_len {length:,} is above the model's native context of {native:,} tokens",
                f"serve at most {native:,}, or set env VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 with a rope scaling the "
                "model supports",
            )
    heads, tp = (
        _value(arch.get("attention_heads")) if isinstance(arch, dict) else None,
        _value(args.get("tensor_parallel_size")),
    )
    if isinstance(heads, int) and isinstance(tp, int) and not isinstance(tp, bool) and tp > 1 and heads % tp:
        diag(
            "serve.args.tensor_parallel_size",
            f"tensor_parallel_size {tp:,} does not divide the model's {heads:,} attention heads",
            "vLLM splits the attention heads evenly over the tensor-parallel group: use a divisor of "
            f"{heads:,}, or data parallelism for more GPUs",
        )
    space = _value(env.get("VLLM_CPU_KVCACHE_SPACE"))
    if space is not None:
        try:
            gib = float(str(space)) if not isinstance(space, bool) else math.nan
        except ValueError:
            gib = math.nan
        if not (0 < gib <= MAX_KV_SPACE_GIB):
            diag(
                "env.VLLM_CPU_KVCACHE_SPACE",
                f"VLLM_CPU_KVCACHE_SPACE is {printable(str(space)[:40])!r}: the KV cache's GiB must be a number above "
                f"0 and at most {MAX_KV_SPACE_GIB:,}",
                "give the GiB of host memory for the KV cache, e.g. --set env.VLLM_CPU_KVCACHE_SPACE=2 "
                "(`cookbook plan` shows what fits)",
            )
    catalogue = flags.catalogue()
    for name, node in args.items():
        v = _value(node)
        if isinstance(v, str) and flags.MAPPING in (catalogue.get(name) or {}).get("anyOf", []):
            try:
                parsed = loads_json(v, what=f"serve.args.{name}", max_bytes=1 << 20)
                if not isinstance(parsed, dict):
                    raise ValueError(f"serve.args.{name} is JSON but not an object")
            except ValueError as e:
                diag(
                    f"serve.args.{name}",
                    str(e),
                    f'write it as a mapping, e.g. --set \'serve.args.{name}={{"method": "ngram"}}\', or null',
                )
    return out
