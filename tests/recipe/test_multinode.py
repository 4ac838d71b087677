"""`cookbook launch SLUG --nodes N`: how every seed multi-GPU recipe splits over nodes, the flags
each node gets, the refusals (one message, exit 2, nothing on stdout), and that nothing a
recipe or --head-addr holds runs as shell when the node blocks are pasted into bash (the
server, python3 and ray replaced by an argv-recording stub: `_stub_server` in a name says so)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from multinode_helpers import (
    CASES,
    expected_calls,
    gpu_recipe,
    hostile_resolved,
    layouts,
    multi_gpu_slugs,
    node_env,
    stubs,
)
from shell_helpers import run_block, stub_calls

from cookbook.cli import main
from cookbook.plan.launch_block import launch_block, planned
from cookbook.recipe import multinode
from cookbook.recipe.resolve import resolve

LAYOUTS = layouts()


def flags(argv: list[str]) -> dict[str, str | None]:
    out, i = {}, 0
    while i < len(argv):
        if argv[i].startswith("--"):
            has_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            out[argv[i]] = argv[i + 1] if has_value else None
            i += 2 if has_value else 1
        else:
            i += 1
    return out


def test_every_multi_gpu_recipe_splits_over_two_nodes():
    split = {slug for slug, nodes, _ in LAYOUTS if nodes == 2}
    assert split == set(multi_gpu_slugs()) and len(split) >= 10


@pytest.mark.parametrize("slug,nodes,lay", LAYOUTS, ids=[f"{s}-{n}" for s, n, _ in LAYOUTS])
def test_mp_nodes_share_one_world(slug, nodes, lay):
    resolved = resolve(slug)
    argvs = [multinode.node_argv(resolved, planned(resolved), lay, r, "mp", "10.0.0.1") for r in range(nodes)]
    fl = [flags(a) for a in argvs]
    assert "--headless" not in fl[0] and all("--headless" in f for f in fl[1:])
    assert lay.gpus_per_node * nodes == lay.world
    if lay.dp > 1:
        # every DP rank exactly once: node r runs ranks [start, start + local)
        ranks = []
        for f in fl:
            start = int(f.get("--data-parallel-start-rank", "0"))
            ranks += range(start, start + int(f["--data-parallel-size-local"]))
            assert f["--data-parallel-address"] == "10.0.0.1" and "--nnodes" not in f
        assert ranks == list(range(lay.dp))
        assert lay.tp * lay.pp * lay.dp_local == lay.gpus_per_node
    else:
        assert [f["--node-rank"] for f in fl] == [str(r) for r in range(nodes)]
        assert {(f["--nnodes"], f["--master-addr"], f["--master-port"]) for f in fl} == {
            (str(nodes), "10.0.0.1", str(multinode.MASTER_PORT))
        }
    # headless nodes run the `serve` CLI: api_server's module ignores --headless
    for argv in argvs[1:]:
        assert argv[:2] == ["vllm", "serve"] or argv[1:4] == ["-m", multinode.CLI_MODULE, "serve"]


@pytest.mark.parametrize("slug,nodes,lay", LAYOUTS, ids=[f"{s}-{n}" for s, n, _ in LAYOUTS])
def test_ray_runs_one_server_on_the_head(slug, nodes, lay):
    text = launch_block(resolve(slug), nodes=nodes, runtime="ray", head_addr="10.0.0.1", comments=False)
    blocks = text.split("\n\n")
    assert len(blocks) == nodes
    assert "ray start --head --port 6379" in blocks[0] and "--distributed-executor-backend ray" in blocks[0]
    for b in blocks[1:]:
        assert b.rstrip().endswith("ray start --address 10.0.0.1:6379 --block") and "serve" not in b
    assert ("--data-parallel-backend ray" in blocks[0]) == (lay.dp > 1)


def _cli(*args):
    res = CliRunner().invoke(main, ["launch", *args])
    return res.exit_code, res.stdout, res.stderr


REFUSALS = [
    (["glm52-8", "--nodes", "3"], "8 GPUs (TP 8) do not split evenly over 3 nodes"),
    (["k3-8", "--nodes", "8"], "one data-parallel replica (TP 2 x PP 1 = 2 GPUs) is larger than a node's share (1"),
    (["k3-8", "--nodes", "1"], "--nodes must be 2 or more"),
    (["gemma3-270m-cpu", "--nodes", "2"], "is a CPU recipe"),
    (["k3-8", "--nodes", "2", "--node-rank", "2"], "--node-rank 2 is not a node of 2"),
    (["k3-8", "--nodes", "2", "--runtime", "lws", "--node-rank", "1"], "--node-rank does not apply to --runtime lws"),
    (["k3-8", "--node-rank", "1"], "--node-rank needs --nodes"),
    (["k3-8", "--runtime", "ray"], "needs --nodes"),
    (["k3-8", "--nodes", "2", "--head-addr", "a\nb"], "--head-addr holds the control character"),
]


@pytest.mark.parametrize("args,message", REFUSALS, ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_refusals_say_one_thing_and_print_nothing(args, message):
    code, out, err = _cli(*args)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("error:") == 1, err


def test_a_recipe_setting_a_per_node_flag_is_refused(tmp_path, monkeypatch):
    gpu_recipe(tmp_path, tmp_path / "s", 2, serve__args={"tensor_parallel_size": 2, "headless": True})
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    code, out, err = _cli("hostile", "--nodes", "2")
    assert code == 2 and out == "" and "the recipe sets serve.args.headless, which --nodes sets per node" in err


def test_dp_replicas_must_split_over_nodes(tmp_path, monkeypatch):
    gpu_recipe(tmp_path, tmp_path / "s", 1, serve__args={"tensor_parallel_size": 2, "data_parallel_size": 3})
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path / "recipes"))
    code, out, err = _cli("hostile", "--nodes", "2")
    assert code == 2 and out == "" and "3 data-parallel replicas do not split evenly over 2 nodes" in err


@pytest.mark.parametrize("site,payload", CASES, ids=[f"{s}-{ascii(p)[1:-1][:40]}" for s, p in CASES])
@pytest.mark.parametrize("dp", [1, 2], ids=["nnodes", "dp"])
@pytest.mark.parametrize("runtime", ["mp", "ray"])
def test_hostile_text_in_node_blocks_runs_no_shell_stub_server(tmp_path, monkeypatch, payload, site, dp, runtime):
    sentinel = tmp_path / "PWNED"
    payload = payload.replace("/SENTINEL-DIR/PWNED", str(sentinel))
    head = payload if site == "head-addr" else "10.0.0.1"
    resolved = hostile_resolved(tmp_path, monkeypatch, sentinel, dp, None if site == "head-addr" else site, payload)
    lay = multinode.layout(resolved, 2)
    bin_dir, _ = stubs(tmp_path)
    for rank in range(2):
        calls = tmp_path / f"calls-{rank}"
        calls.mkdir()
        block = launch_block(resolved, nodes=2, runtime=runtime, node_rank=rank, head_addr=head)
        p = run_block(block, tmp_path, bin_dir, calls)
        assert not sentinel.exists(), f"the payload ran:\n{block}"
        assert p.returncode == 0, p.stderr + block
        env = node_env(resolved, tmp_path)
        if runtime == "ray":
            ray = (
                ["start", "--head", "--port", "6379"]
                if rank == 0
                else ["start", "--address", f"{head}:6379", "--block"]
            )
            argv = multinode.node_argv(resolved, planned(resolved), lay, 0, "ray", head) if rank == 0 else None
            assert stub_calls(calls) == expected_calls(resolved, argv, env, ray), block
        else:
            argv = multinode.node_argv(resolved, planned(resolved), lay, rank, "mp", head)
            assert stub_calls(calls) == expected_calls(resolved, argv, env), block


@pytest.mark.parametrize("slug,nodes,lay", LAYOUTS, ids=[f"{s}-{n}" for s, n, _ in LAYOUTS])
def test_every_seed_node_block_and_pod_script_is_valid_bash(slug, nodes, lay):
    import subprocess

    resolved = resolve(slug)
    texts = [
        launch_block(resolved, nodes=nodes, runtime=rt, node_rank=rank) for rt in ("mp", "ray") for rank in range(nodes)
    ]
    texts += list(
        multinode.lws_scripts(resolved, planned(resolved), lay)
    )  # as bash gets them (test_multinode_lws: the kubelet)
    for text in texts:
        res = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr + text


def test_recipe_pages_show_the_two_node_blocks():
    from cookbook.site.recipe_page import recipe_page

    resolved = resolve("k3-8")
    page = recipe_page("k3-8")
    for runtime in ("mp", "ray", "lws"):
        block = launch_block(resolved, nodes=2, runtime=runtime).rstrip().split("\n")
        # the page collapses each under a note: its body indented four spaces (blank lines left blank)
        assert "\n".join(("    " + ln) if ln else "" for ln in block) in page
    assert "## Multi-node" not in recipe_page("gemma3-270m-cpu")
