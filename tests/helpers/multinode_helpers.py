"""What the multi-node tests share: the recipes and node counts rendered, Kubernetes' own
expansion of container arguments, and the LeaderWorkerSet schema kept as test data."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from cookbook.errors import CookbookError
from cookbook.recipe import multinode
from cookbook.recipe.resolve import all_slugs, resolve

LWS_SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "lws" / "leaderworkerset-v1.schema.json"
NODE_COUNTS = (2, 3, 4, 8)


@cache
def lws_schema() -> dict:
    return json.loads(LWS_SCHEMA.read_text())


def multi_gpu_slugs() -> list[str]:
    out = []
    for slug in all_slugs():
        r = resolve(slug, check=False)
        if not r.recipe.abstract and r.recipe.hardware.gpus >= 2:
            out.append(slug)
    return out


def layouts() -> list[tuple[str, int, multinode.Layout]]:
    """(slug, nodes, layout) for every seed multi-GPU recipe and every node count it splits over."""
    out = []
    for slug in multi_gpu_slugs():
        resolved = resolve(slug)
        for nodes in NODE_COUNTS:
            try:
                out.append((slug, nodes, multinode.layout(resolved, nodes)))
            except CookbookError:
                continue
    return out


def k8s_expand(text: str, env: dict[str, str]) -> str:
    """A container argument as the kubelet expands it: `$$` is one `$`, `$(NAME)` is the
    value of a variable the container defines (left as written when it does not), any
    other `$` is itself (Kubernetes' third_party/forked/golang/expansion)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(" and (j := text.find(")", i + 2)) != -1:
                name = text[i + 2 : j]
                out.append(env.get(name, text[i : j + 1]))
                i = j + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def pruned_fields(instance, schema: dict, path: str = "") -> list[str]:
    """Fields of `instance` the API server would drop silently: keys an object schema neither
    lists in `properties` nor allows through `additionalProperties` or
    x-kubernetes-preserve-unknown-fields. An object schema with neither (ObjectMeta) is left
    open by the CRD; Kubernetes checks it itself."""
    out: list[str] = []
    if isinstance(instance, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return out
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        for key, value in instance.items():
            if props is not None and key in props:
                out += pruned_fields(value, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += pruned_fields(value, extra, f"{path}.{key}")
            elif props is not None or extra is False:
                out.append(f"{path}.{key}")
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        for i, value in enumerate(instance):
            out += pruned_fields(value, schema["items"], f"{path}[{i}]")
    return out
