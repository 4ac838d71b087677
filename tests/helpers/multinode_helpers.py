"""What the multi-node tests share: the recipes and node counts rendered, Kubernetes' own
expansion of container arguments, and the LeaderWorkerSet schema kept as test data."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

from shell_helpers import base_recipe, payloads, stub_bin, write_recipe

from cookbook.errors import CookbookError
from cookbook.recipe import multinode, shell
from cookbook.recipe.launch import env_items
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


def gpu_recipe(tmp_path: Path, sentinel: Path, dp: int, **tweak) -> str:
    data = base_recipe("hostile", sentinel)
    data["hardware"] = {"platform": "h200", "gpus": 4}
    data["serve"]["args"]["tensor_parallel_size"] = 4 // dp
    if dp > 1:
        data["serve"]["args"]["data_parallel_size"] = dp
    for dotted, value in tweak.items():
        node = data
        *path, last = dotted.split("__")
        for p in path:
            node = node[p]
        node[last] = value
    write_recipe(tmp_path / "recipes", data)
    return "hostile"


def hostile_resolved(tmp_path: Path, monkeypatch, sentinel: Path, dp: int, site: str | None, payload: str):
    """The hostile GPU recipe with `payload` at `site` (a gpu_recipe tweak path, `env__EXTRA` for a new
    exported variable, or None for none), resolved from a recipes folder of its own."""
    tweak = {} if site is None else {site: payload}
    if site == "env__EXTRA":
        tweak = {"env": {**base_recipe("x", sentinel)["env"], "EXTRA": payload}}
    slug = gpu_recipe(tmp_path, sentinel, dp, **tweak)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    return resolve(slug)


class _Unset(dict):
    """An environment where an unset name reads as empty, as bash (without set -u) reads it."""

    def __contains__(self, key):
        return True

    def __getitem__(self, key):
        return self.get(key, "")


def node_env(resolved, tmp_path: Path, extra: dict | None = None) -> _Unset:
    env = _Unset({k: v for k, v in os.environ.items() if k not in ("CHECKPOINT_DIR", "COOKBOOK", "HOSTILE")})
    env.update({"PWD": str(tmp_path), **(extra or {})})
    for name, value in env_items(resolved):
        env[name] = shell.expand(value, env)
    return env


def expected_calls(resolved, argv: list[str] | None, env, ray: list[str] | None = None) -> list[list[str]]:
    """The stubs' calls: the fix-pack line, `ray start` when given, then the server argv, each
    reference expanded as bash expands it and everything else as written."""
    fixes = resolved.recipe.image.fixes
    script = fixes.launch_script[1:-1] if fixes.launch_script.startswith('"') else fixes.launch_script
    calls = [
        ["python3", shell.expand(script, env), "--check", "--profile", fixes.profile] + [f.name for f in fixes.opt_in]
    ]
    if ray:
        calls.append(["ray", *(shell.expand(t, env) for t in ray)])
    if argv:
        out = [shell.expand(t, env) for t in argv]
        out[0] = os.path.basename(out[0])
        calls.append(out)
    return calls


def stubs(tmp_path: Path):
    bin_dir, calls = stub_bin(tmp_path)
    (bin_dir / "ray").write_text((bin_dir / "vllm").read_text())
    (bin_dir / "ray").chmod(0o755)
    return bin_dir, calls


PAYLOADS = payloads(Path("/SENTINEL-DIR") / "PWNED")
SAFE = [p for p in PAYLOADS if shell.control_char(p) is None]
# Every payload through --head-addr (new text here); the recipe sites, which the launch block's
# own tests cover payload by payload, with one payload of each kind.
SHORT = [p for p in SAFE if p.startswith(("$(", "`", "x;", "'", '"', "${X:-$", "$HOSTILE"))]
CASES = [("head-addr", p) for p in SAFE] + [
    (site, p) for site in ("serve__args__served_model_name", "serve__model", "env__EXTRA") for p in SHORT
]
