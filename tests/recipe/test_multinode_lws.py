"""`cookbook launch SLUG --nodes N --runtime lws`: every manifest is a LeaderWorkerSet the CRD's
own openAPIV3Schema accepts (tests/fixtures/lws, kubernetes-sigs/lws v0.10.0) with no field the
API server would drop, its open ObjectMeta holds valid Kubernetes names, and the pods' scripts,
expanded as the kubelet expands container arguments, run in bash exactly the mp commands
(the server and python3 replaced by an argv-recording stub: `_stub_server` says so)."""

from __future__ import annotations

import re

import jsonschema
import pytest
import yaml
from multinode_helpers import (
    CASES,
    expected_calls,
    gpu_recipe,
    hostile_resolved,
    k8s_expand,
    layouts,
    lws_schema,
    node_env,
    pruned_fields,
    stubs,
)
from shell_helpers import run_block, stub_calls

from cookbook.plan.launch_block import launch_block, planned
from cookbook.recipe import multinode
from cookbook.recipe.resolve import resolve

LAYOUTS = layouts()
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def validator() -> jsonschema.Validator:
    return jsonschema.Draft7Validator(lws_schema())


def manifest(resolved, nodes: int, image: str | None = None) -> dict:
    text = launch_block(resolved, nodes=nodes, runtime="lws", image=image)
    docs = list(yaml.safe_load_all(text))
    assert len(docs) == 1
    return docs[0]


def test_the_schema_refuses_what_it_should():
    """The kept schema bites: a wrong type, an unknown enum value and a dropped field are caught."""
    obj = manifest(resolve("k3-8"), 2)
    bad_size = yaml.safe_load(yaml.safe_dump(obj))
    bad_size["spec"]["leaderWorkerTemplate"]["size"] = "two"
    bad_policy = yaml.safe_load(yaml.safe_dump(obj))
    bad_policy["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Always"
    for bad in (bad_size, bad_policy):
        assert list(validator().iter_errors(bad))
    extra = yaml.safe_load(yaml.safe_dump(obj))
    extra["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["gpus"] = 4
    assert pruned_fields(extra, lws_schema()) == [".spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].gpus"]


@pytest.mark.parametrize("slug,nodes,lay", LAYOUTS, ids=[f"{s}-{n}" for s, n, _ in LAYOUTS])
def test_manifest_is_a_valid_leaderworkerset(slug, nodes, lay):
    obj = manifest(resolve(slug), nodes, image="registry.example/cookbook:1")
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator().iter_errors(obj)]
    assert not errors
    assert pruned_fields(obj, lws_schema()) == []
    assert (obj["apiVersion"], obj["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    meta = obj["metadata"]
    assert DNS_LABEL.match(meta["name"]) and len(meta["name"]) <= 63
    lwt = obj["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == nodes
    for role in ("leaderTemplate", "workerTemplate"):
        labels = {**meta["labels"], **lwt[role]["metadata"]["labels"]}
        assert all(LABEL_VALUE.match(v) and len(v) <= 63 for v in labels.values()), labels
        [c] = lwt[role]["spec"]["containers"]
        assert DNS_LABEL.match(c["name"]) and c["image"] == "registry.example/cookbook:1"
        assert list(c["resources"]["limits"].values()) == [lay.gpus_per_node]
        mounts = {m["name"] for m in c["volumeMounts"]}
        assert mounts == {v["name"] for v in lwt[role]["spec"]["volumes"]}


@pytest.mark.parametrize("site,payload", CASES[::3], ids=[f"{s}-{ascii(p)[1:-1][:40]}" for s, p in CASES[::3]])
@pytest.mark.parametrize("dp", [1, 2], ids=["nnodes", "dp"])
def test_pod_scripts_run_the_mp_commands_stub_server(tmp_path, monkeypatch, site, payload, dp):
    sentinel = tmp_path / "PWNED"
    payload = payload.replace("/SENTINEL-DIR/PWNED", str(sentinel))
    if site == "head-addr":  # LWS names the leader itself: put the payload in the model name instead
        site = "serve__args__served_model_name"
    resolved = hostile_resolved(tmp_path, monkeypatch, sentinel, dp, site, payload)
    lay = multinode.layout(resolved, 2)
    obj = manifest(resolved, 2)
    lwt = obj["spec"]["leaderWorkerTemplate"]
    bin_dir, _ = stubs(tmp_path)
    pods = {"leaderTemplate": 0, "workerTemplate": 1}
    for role, index in pods.items():
        [c] = lwt[role]["spec"]["containers"]
        assert c["command"] == ["/bin/bash", "-c"]
        pod_env = {"LWS_LEADER_ADDRESS": "lws-0.lws", "LWS_WORKER_INDEX": str(index), "LWS_GROUP_SIZE": "2"}
        script = k8s_expand(c["args"][0], pod_env)  # the container defines no env: only $$ changes
        calls = tmp_path / f"calls-{index}"
        calls.mkdir()
        p = run_block(script, tmp_path, bin_dir, calls, env=pod_env)
        assert not sentinel.exists(), script
        assert p.returncode == 0, p.stderr + script
        env = node_env(resolved, tmp_path, pod_env)
        argv = multinode.node_argv(resolved, planned(resolved), lay, index, "mp", "lws-0.lws")
        assert stub_calls(calls) == expected_calls(resolved, argv, env), script


def test_k8s_expand_is_kubernetes_rules():
    env = {"A": "x"}
    assert k8s_expand("$(A) $$(A) $$ $B $(B) a$", env) == "x $(A) $ $B $(B) a$"


def test_lws_names_the_recipe_image_placeholder_when_no_image_is_given():
    obj = manifest(resolve("glm52-8"), 2)
    [c] = obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"]
    assert c["image"] == "<your-image-for-glm52-8>"
    assert c["ports"][0]["containerPort"] == 8000 and c["readinessProbe"]["httpGet"]["path"] == "/health"


@pytest.mark.parametrize("text", ["$(LWS_WORKER_INDEX)", "$$(LWS_GROUP_SIZE)", "a$$-b"])
def test_kubernetes_references_in_recipe_text_stay_text_stub_server(tmp_path, monkeypatch, text):
    """LWS defines these variables in every container, so the kubelet would expand them in an
    unescaped argument; the manifest doubles each `$`, and the server gets the recipe's text."""
    slug = gpu_recipe(tmp_path, tmp_path / "PWNED", 1, serve__args__served_model_name=text)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    resolved = resolve(slug)
    [c] = manifest(resolved, 2)["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
    pod_env = {"LWS_LEADER_ADDRESS": "lws-0.lws", "LWS_WORKER_INDEX": "1", "LWS_GROUP_SIZE": "2"}
    bin_dir, calls = stubs(tmp_path)
    p = run_block(k8s_expand(c["args"][0], pod_env), tmp_path, bin_dir, calls, env=pod_env)
    assert p.returncode == 0, p.stderr
    served = stub_calls(calls)[-1]
    assert served[served.index("--served-model-name") + 1] == text
