"""A recipe's launch over several nodes: on vLLM's own distributed runtime, or as a Kubernetes
LeaderWorkerSet (leaderworkerset.x-k8s.io/v1).

The recipe's world (tensor x pipeline x data-parallel ranks, one GPU each) is split evenly over
`--nodes N`; node 0 is the head and serves the API. Runtimes:

- mp, without data parallelism: every node runs the server with --nnodes/--node-rank/
  --master-addr/--master-port, every node but the head --headless (TP and PP may cross nodes).
- mp, with data parallelism: each replica (TP x PP GPUs) stays inside one node; the head runs
  its DP/N local ranks and the API, the others --headless from their --data-parallel-start-rank,
  all with --data-parallel-size-local/--data-parallel-address/--data-parallel-rpc-port.
- ray: one Ray cluster (`ray start --head` on the head, `ray start --address ... --block` on the
  others), then one server on the head with --distributed-executor-backend ray (and
  --data-parallel-backend ray with data parallelism).
- lws: a LeaderWorkerSet of N pods (leader = node 0) running the mp commands through
  `bash -c`, with the leader's address and each pod's index from the variables LWS sets.

Headless nodes run `vllm serve` (or `PYTHON -m vllm.entrypoints.cli.main serve` for an
api-server recipe): `python -m vllm.entrypoints.openai.api_server` parses --headless but starts
an API server all the same (vLLM 0.32.0, entrypoints/launchers/api_server/entry.py).

Every recipe text goes through the launch block's quoting (cookbook.recipe.launch/shell);
the manifest's scripts are those blocks with each `$` doubled, so Kubernetes expands nothing
(`$$` is its escape) and bash sees exactly the block. PyYAML writes the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from cookbook import platforms
from cookbook.errors import CookbookError
from cookbook.recipe import launch, shell
from cookbook.recipe.resolve import ResolvedRecipe

RUNTIMES = ("mp", "ray", "lws")
HEAD_ADDR = "$HEAD_ADDR"  # default --head-addr: a reference the user exports on every node
MASTER_PORT = 29501  # vLLM's default --master-port (torch.distributed of a multi-node mp world)
DP_RPC_PORT = 29550  # vLLM's default --data-parallel-rpc-port
RAY_PORT = 6379  # `ray start --head`'s default port
CLI_MODULE = "vllm.entrypoints.cli.main"
# Flags this module sets per node; a recipe that sets one itself is refused.
NODE_KEYS = (
    "nnodes",
    "node_rank",
    "master_addr",
    "master_port",
    "headless",
    "data_parallel_size_local",
    "data_parallel_start_rank",
    "data_parallel_address",
    "data_parallel_rpc_port",
    "data_parallel_backend",
    "distributed_executor_backend",
)
# Kubernetes extended resource of one accelerator, by vendor (device plugins' names).
GPU_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu", "intel": "habana.ai/gaudi"}
LWS_ADDR = "$LWS_LEADER_ADDRESS"
LWS_INDEX = "$LWS_WORKER_INDEX"


def gpus(n: int) -> str:
    return f"{n} GPU" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class Layout:
    nodes: int
    tp: int
    pp: int
    dp: int

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def gpus_per_node(self) -> int:
        return self.world // self.nodes

    @property
    def dp_local(self) -> int:
        return self.dp // self.nodes

    @property
    def tp_crosses_nodes(self) -> bool:
        return self.tp > self.gpus_per_node

    def describe(self) -> str:
        parts = (
            [f"TP {self.tp}"] + ([f"PP {self.pp}"] if self.pp > 1 else []) + ([f"DP {self.dp}"] if self.dp > 1 else [])
        )
        return f"{' x '.join(parts)} = {self.world} GPUs over {self.nodes} nodes of {gpus(self.gpus_per_node)}"


def _int_arg(resolved: ResolvedRecipe, key: str) -> int:
    value = resolved.recipe.serve.arg(key, 1)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CookbookError(
            f"{resolved.slug}: serve.args.{key} is {value!r}, not a whole number of ranks",
            help=f"set serve.args.{key} to a positive integer",
        )
    return value


def layout(resolved: ResolvedRecipe, nodes: int) -> Layout:
    """The split of the recipe's ranks over `nodes`, or a refusal saying why it cannot be split."""
    slug = resolved.slug
    where = f"cannot launch {slug} on {nodes} nodes"
    if nodes < 2:
        raise CookbookError(
            f"{where}: --nodes must be 2 or more", help=f"for one node, run `cookbook launch {slug}` without --nodes"
        )
    if resolved.recipe.hardware.platform == "cpu":
        raise CookbookError(f"{where}: {slug} is a CPU recipe", help="multi-node launches are for multi-GPU recipes")
    set_here = [k for k in NODE_KEYS if resolved.recipe.serve.arg(k) is not None]
    if set_here:
        raise CookbookError(
            f"{where}: the recipe sets serve.args.{set_here[0]}, which --nodes sets per node",
            help=f"remove serve.args.{set_here[0]} (or --set {set_here[0]}=null) and let --nodes render it",
        )
    lay = Layout(nodes, _int_arg(resolved, "tensor_parallel_size"), _int_arg(resolved, "pipeline_parallel_size"),
                 _int_arg(resolved, "data_parallel_size"))  # fmt: skip
    if lay.world % nodes:
        raise CookbookError(
            f"{where}: {lay.world} GPUs ({lay.describe().split(' = ')[0]}) do not split evenly over {nodes} nodes",
            help=f"choose a node count that divides {lay.world}",
        )
    if lay.dp > 1:
        replica = lay.tp * lay.pp
        if replica > lay.gpus_per_node:
            raise CookbookError(
                f"{where}: one data-parallel replica (TP {lay.tp} x PP {lay.pp} = {replica} GPUs) is larger than "
                f"a node's share ({gpus(lay.gpus_per_node)}); vLLM keeps each replica's ranks on one node",
                help=f"use fewer nodes (at most {lay.dp}), or a smaller tensor_parallel_size",
            )
        if lay.dp % nodes:
            raise CookbookError(
                f"{where}: {lay.dp} data-parallel replicas do not split evenly over {nodes} nodes",
                help=f"choose a node count that divides {lay.dp}",
            )
    return lay


def _serve_head(resolved: ResolvedRecipe, headless: bool) -> list[str]:
    serve = resolved.recipe.serve
    if serve.command == "vllm-serve":
        return ["vllm", "serve", serve.model]
    if headless:
        return [serve.python, "-m", CLI_MODULE, "serve", serve.model]
    return [serve.python, "-m", launch.API_SERVER_MODULE, "--model", serve.model]


def node_argv(resolved: ResolvedRecipe, planned: launch.Planned, lay: Layout, rank: int, runtime: str,
              head_addr: str, start_rank: str | None = None) -> list[str]:  # fmt: skip
    """The server argv of node `rank` (no shell). On Ray only the head runs a server.
    `start_rank` replaces the head-relative DP start rank (the LWS worker's shell variable)."""
    headless = rank > 0 and runtime != "ray"
    argv = _serve_head(resolved, headless)
    for key, setting in resolved.recipe.serve.args.items():
        argv += launch.flag_tokens(key, setting.value)
    argv += launch.planned_tokens(planned)
    if runtime == "ray":
        argv += ["--distributed-executor-backend", "ray"]
        if lay.dp > 1:
            argv += ["--data-parallel-backend", "ray"]
        return argv
    if lay.dp > 1:
        argv += ["--data-parallel-size-local", str(lay.dp_local)]
        argv += ["--data-parallel-address", head_addr, "--data-parallel-rpc-port", str(DP_RPC_PORT)]
        if rank > 0:
            argv += ["--data-parallel-start-rank", start_rank or str(rank * lay.dp_local)]
    else:
        argv += ["--nnodes", str(lay.nodes), "--node-rank", str(rank)]
        argv += ["--master-addr", head_addr, "--master-port", str(MASTER_PORT)]
    if headless:
        argv.append("--headless")
    return argv


def _quote_addr(text: str) -> str:
    try:
        return shell.quote_arg(text)
    except shell.UnsafeText as exc:
        raise CookbookError(f"--head-addr {exc}", help="give the head node's address or a $VARIABLE") from None


def _title(resolved: ResolvedRecipe, nodes: int, rank: int | None, runtime: str) -> str:
    quant = f" --quant {resolved.quant}" if resolved.quant else ""
    node = f" --node-rank {rank}" if rank is not None else ""
    return f"cookbook launch {resolved.slug}{quant} --nodes {nodes}{node} --runtime {runtime}"


def node_block(resolved: ResolvedRecipe, planned: launch.Planned, lay: Layout, rank: int, runtime: str,
               head_addr: str, comments: bool = True, rank_in_title: bool = True) -> str:  # fmt: skip
    """The block node `rank` pastes into bash: exports, fix check, Ray start if any, then its server."""
    title = _title(resolved, lay.nodes, rank if rank_in_title else None, runtime)
    if runtime == "ray" and rank > 0:  # a Ray worker runs no server: no flags to explain
        planned = launch.NO_PLAN
    lines = launch.prelude(resolved, planned, comments, title=title)
    addr = _quote_addr(head_addr)
    if comments:
        role = (
            "the head: serves the API" if rank == 0 else ("joins the Ray cluster" if runtime == "ray" else "headless")
        )
        notes = [f"# node {rank} of {lay.nodes} ({role}); {lay.describe()}"]
        if lay.tp_crosses_nodes:
            notes.append(f"# TP {lay.tp} crosses nodes: every layer's all-reduce goes over the network between them")
        if head_addr == HEAD_ADDR and not (runtime == "ray" and rank == 0):
            notes.append("# export HEAD_ADDR=<the head node's address, reachable from every node> first, on every node")
        lines[2:2] = notes
    if runtime == "ray":
        if rank == 0:
            lines.append(f"ray start --head --port {RAY_PORT}")
        else:
            lines.append(f"ray start --address {addr}:{RAY_PORT} --block")
            return "\n".join(lines) + "\n"
    lines.append(launch.command_text(resolved, node_argv(resolved, planned, lay, rank, runtime, head_addr)))
    return "\n".join(lines) + "\n"


def render(resolved: ResolvedRecipe, planned: launch.Planned, nodes: int, runtime: str = "mp",
           rank: int | None = None, head_addr: str = HEAD_ADDR, comments: bool = True,
           image: str | None = None) -> str:  # fmt: skip
    """What `cookbook launch SLUG --nodes N` prints: one node's block, every node's, or the manifest.
    Callers use cookbook.plan.launch_block.launch_block (it hands in the plan's flags)."""
    if runtime not in RUNTIMES:
        raise CookbookError(f"--runtime {runtime!r} is not one of {', '.join(RUNTIMES)}")
    lay = layout(resolved, nodes)
    if runtime == "lws":
        if rank is not None:
            raise CookbookError(
                "--node-rank does not apply to --runtime lws: the manifest holds every node",
                help="drop --node-rank, or choose --runtime mp or ray",
            )
        return lws_manifest(resolved, planned, lay, image=image)
    if rank is not None:
        if not 0 <= rank < nodes:
            raise CookbookError(f"--node-rank {rank} is not a node of {nodes} (0 to {nodes - 1})")
        return node_block(resolved, planned, lay, rank, runtime, head_addr, comments)
    blocks = [
        node_block(resolved, planned, lay, r, runtime, head_addr, comments, rank_in_title=False) for r in range(nodes)
    ]
    if not comments:
        return "\n".join(blocks)
    return "\n".join(f"# ---- node {r} ----\n{b}" for r, b in enumerate(blocks))


def _k8s_text(script: str) -> str:
    """The script as a container argument: Kubernetes expands $(VAR) in args, and `$$` is its escape."""
    return script.replace("$", "$$")


def lws_scripts(resolved: ResolvedRecipe, planned: launch.Planned, lay: Layout) -> tuple[str, str]:
    """(leader, worker) bash scripts: the mp commands of node 0 and of any other node, the
    leader's address and the worker's index from the variables LWS sets in every pod. `exec`
    makes the server the container's main process, so it gets the pod's signals."""
    leader = [*launch.prelude(resolved, planned, comments=False)]
    leader.append("exec " + launch.command_text(resolved, node_argv(resolved, planned, lay, 0, "mp", LWS_ADDR)))
    argv = node_argv(resolved, planned, lay, 1, "mp", LWS_ADDR, start_rank="$START_RANK")
    argv = [LWS_INDEX if (i and argv[i - 1] == "--node-rank") else t for i, t in enumerate(argv)]
    worker = [*launch.prelude(resolved, planned, comments=False)]
    if lay.dp > 1:
        worker.append(f"START_RANK=$((LWS_WORKER_INDEX * {lay.dp_local}))")
    worker.append("exec " + launch.command_text(resolved, argv))
    return "\n".join(leader) + "\n", "\n".join(worker) + "\n"


def _container(name: str, image: str, script: str, gpus: int, resource: str | None, port: int | None) -> dict:
    c: dict = {
        "name": name,
        "image": image,
        "command": ["/bin/bash", "-c"],
        "args": [_k8s_text(script)],
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if resource:
        c["resources"] = {"limits": {resource: gpus}}
    if port is not None:
        c["ports"] = [{"name": "http", "containerPort": port}]
        c["readinessProbe"] = {"httpGet": {"path": "/health", "port": port}, "periodSeconds": 10}
    return c


def lws_object(resolved: ResolvedRecipe, planned: launch.Planned, lay: Layout, image: str | None = None) -> dict:
    """The LeaderWorkerSet as data (what lws_manifest writes as YAML)."""
    r = resolved.recipe
    image = image or f"<your-image-for-{resolved.slug}>"
    plat = platforms.get(r.hardware.platform)
    resource = GPU_RESOURCE.get(plat.vendor) if plat else None
    port = r.serve.arg("port", 8000)
    leader, worker = lws_scripts(resolved, planned, lay)
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    labels = {"app.kubernetes.io/name": resolved.slug}

    def template(role: str, script: str, port: int | None) -> dict:
        return {
            "metadata": {"labels": {**labels, "role": role}},
            "spec": {
                "containers": [_container(f"vllm-{role}", image, script, lay.gpus_per_node, resource, port)],
                "volumes": volumes,
            },
        }

    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": resolved.slug, "labels": labels},
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": lay.nodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": template("leader", leader, port),
                "workerTemplate": template("worker", worker, None),
            },
        },
    }


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:  # a manifest spells every value out (no &id001 anchors)
        return True


def _str(dumper: yaml.SafeDumper, text: str):
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _str)


def lws_manifest(resolved: ResolvedRecipe, planned: launch.Planned, lay: Layout, image: str | None = None) -> str:
    head = [
        f"# {resolved.slug}: {resolved.recipe.summary}",
        f"# generated by `{_title(resolved, lay.nodes, None, 'lws')}`; recipe {resolved.content_hash[:19]}",
        f"# {lay.describe()}; apply with `kubectl apply -f` on a cluster with LeaderWorkerSet installed",
    ]
    body = yaml.dump(lws_object(resolved, planned, lay, image), Dumper=_Dumper, sort_keys=False, width=10_000)
    return "\n".join(head) + "\n" + body
