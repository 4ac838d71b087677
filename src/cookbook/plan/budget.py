"""The memory plan of one recipe on one GPU: weights, reserves, the KV pool, and the largest
context and concurrency that fit. src/cookbook/plan/README.md says how vLLM sizes its pool and which
figures here are the plan's assumptions."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from cookbook import platforms
from cookbook.errors import BAD_INPUT, CookbookError
from cookbook.plan import concurrency as C
from cookbook.plan import geometry as G
from cookbook.plan import kv as K
from cookbook.plan import weights as W
from cookbook.units import GIB, gib
from cookbook.untrusted import check_regular, loads_json, read_regular

MIB = 2**20
# Memory outside torch that appears after vLLM's first snapshot (the CUDA context is in it, so
# not counted): on this project's H200 (torch 2.11, 2026-12-01) the first BF16 matmul added
# 160 MiB of cuBLAS workspace; rounded up for the other libraries a server loads.
NON_TORCH_BYTES = 256 * MIB
NCCL_BYTES = 768 * MIB  # NCCL and custom all-reduce buffers when TP > 1
# CUDA graphs. vLLM 0.21+ captures them in a profiling pass and takes its estimate out of the
# budget before sizing the pool ("CUDA graph memory profiling is enabled (default since v0.21.0)",
# v1/worker/gpu_model_runner.py profile_cudagraph_memory and gpu_worker.py in 0.26.0; off with
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0); older engines and forks capture them after the pool,
# out of the headroom. The figure is not modelled: vLLM 0.26.0 estimated 0.74-0.75 GiB for
# DeepSeek-V4-Flash at 8 layers and 4.39 GiB for GLM-5.2 at 8 layers with MTP drafting 5 tokens on
# this project's H200 (recipes/*/evidence/engine-check/, server.log "Estimated CUDA graph memory").
CUDA_GRAPH_BYTES = 1 * GIB
GRAPHS_BEFORE_POOL_SINCE = (0, 21)
# Stock vLLM releases whose source the KV model below was checked against: DeepSeek-V4's grouped
# layout (plan/dsv4_layout.py) and fp8_ds_mla for sparse MLA on Hopper (vLLM 0.26.0,
# model_executor/layers/attention/mla_attention.py `_canonicalize_sparse_mla_kv_cache_dtype`:
# FLASHMLA_SPARSE turns any quantized KV dtype into fp8_ds_mla).
VLLM_LAYOUT_SINCE = (0, 26)
# Async scheduling keeps two batches in flight (config/vllm.py max_concurrent_batches, 0.26.0); it is
# on by default unless speculative decoding uses a method outside these (VllmConfig.__post_init__).
ASYNC_SPEC_METHODS = (
    "eagle",
    "eagle3",
    "extract_hidden_states",
    "mtp",
    "deepseek_mtp",
    "glm4_moe_mtp",
    "ernie_mtp",
    "qwen3_next_mtp",
    "mimo_mtp",
    "longcat_flash_mtp",
    "pangu_ultra_moe_mtp",
    "dflash",
    "ngram_gpu",
    "dspark",
)
EXPLICIT_MARGIN = 0.02  # of device memory, left free when the plan sets --kv-cache-memory-bytes
SAMPLER_COPIES = 3  # fp32 logits, their softmax, and a sort buffer in the dummy sampler run
DEFAULT_INDEXER_LOGITS_MB = 512  # VLLM_SPARSE_INDEXER_MAX_LOGITS_MB's default


@dataclass
class Setup:
    """What the plan is computed for (the recipe's values, or the command line's)."""

    platform: str
    device_bytes: int
    device_source: str
    tp: int
    dp: int
    dcp: int
    expert_parallel: bool
    gpus: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    kv_cache_dtype: str
    model_dtype: str | None
    speculative: dict | None
    explicit_kv_bytes: int | None  # serve.args.kv_cache_memory_bytes
    plan_sets_kv_bytes: bool  # recipe.plan.explicit_kv_bytes
    graph_reserved_fraction: float | None  # Gaudi: VLLM_GRAPH_RESERVED_MEM
    indexer_logits_mb: int
    moe_chunk: int | None  # VLLM_MOE_CHUNK: tokens per MoE call (vllm-gaudi)
    enforce_eager: bool
    engine: str = "vllm"  # image.engine.package
    engine_version: tuple[int, ...] | None = None  # image.engine.version, when pinned
    block_size: int | None = None  # serve.args.block_size
    async_scheduling: bool = False  # two batches in flight (the sliding windows' reserve doubles)
    graphs_before_pool: bool = False  # vLLM 0.21+: the CUDA-graph estimate is taken before the pool
    ep_kv_cut_bytes: int = 0  # recipe.plan.expert_parallel_kv_cut_gib, when expert parallelism is on

    @property
    def stock_vllm_layout(self) -> bool:
        """Stock vLLM at or after the release the KV layout model was checked against."""
        return self.engine == "vllm" and self.engine_version is not None and self.engine_version >= VLLM_LAYOUT_SINCE

    @property
    def in_flight_tokens(self) -> int:
        return self.max_num_batched_tokens * (2 if self.async_scheduling else 1)


@dataclass
class Plan:
    slug: str
    quant: str | None
    setup: Setup
    geometry: G.Geometry
    weights: W.Weights
    weights_per_gpu: dict[str, int]
    draft_weights_per_gpu: int
    kv: K.KV
    activation_bytes: int
    non_torch_bytes: int
    workspace_bytes: int
    graph_bytes: int
    requested_bytes: int
    vllm_pool_bytes: int  # what vLLM's own sizing gives
    pool_bytes: int  # the pool the plan counts on (explicit, or vLLM's less what it does not see)
    pool_tokens: int  # the token count vLLM logs for the pool (every layer counted per token)
    seq_bytes_at_ctx: float  # what one full-length sequence holds in the pool
    max_seqs_at_ctx: int
    max_ctx_at_seqs: int
    refusals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    logged_seqs_at_ctx: float = 0.0  # vLLM's "Maximum concurrency" log figure for the pool
    full_length: C.Concurrency | None = None  # max_model_len sequences running at once (plan/concurrency.py)
    typical: C.Concurrency | None = None  # the recipe's typical request (plan.traffic) running at once
    traffic: object | None = None  # recipe.plan.traffic, where the typical request's lengths come from

    @property
    def vllm_kv_bytes_per_token(self) -> float:
        """KV bytes per token as vLLM's log gives them: its pool over "GPU KV cache size"."""
        return self.kv.vllm_bytes_per_token(self.setup.max_model_len)

    @property
    def fits(self) -> bool:
        return not self.refusals

    @property
    def left_bytes(self) -> int:
        """The device's memory left once everything above and the pool are in place."""
        used = self.weights_per_gpu_bytes + self.activation_bytes + self.non_torch_bytes
        return self.setup.device_bytes - used - self.workspace_bytes - self.graph_bytes - self.pool_bytes

    @property
    def left_after_weights_bytes(self) -> int:
        """The device's memory once the weights (and a draft model's) are loaded: the figure users
        reason with ("the weights leave only ~63 GiB per card")."""
        return self.setup.device_bytes - self.weights_per_gpu_bytes

    @property
    def weights_per_gpu_bytes(self) -> int:
        return sum(self.weights_per_gpu.values()) + self.draft_weights_per_gpu


def _env_number(env: dict, name: str, default):
    """An env setting the plan computes with, as a non-negative number; one clear refusal otherwise."""
    if name not in env or env[name].value is None:
        return default
    raw = env[name].value
    try:
        value = float(str(raw))
    except ValueError:
        value = float("nan")
    if isinstance(raw, bool) or not (value >= 0 and value != float("inf")):
        raise CookbookError(
            f"env.{name} is {raw!r}: the plan needs a number >= 0 there",
            help=f"set it to a number, e.g. --set {name}=...",
            exit_code=BAD_INPUT,
        )
    return value


def _mapping(value, key: str) -> dict | None:
    """A JSON flag's value as the planner reads it: a mapping, or its JSON text (vLLM takes both)."""
    if value is None or isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise CookbookError(
            f"serve.args.{key} is {str(value)[:60]!r}: the plan needs a mapping (or its JSON text) there",
            help=f"""write it as a mapping, e.g. --set 'serve.args.{key}={{"method": "ngram"}}', or null""",
            exit_code=BAD_INPUT,
        )
    return parsed


def split_gpus(resolved, gpus: int | None = None) -> tuple[int, int]:
    """(TP, DP) of the recipe, or for --gpus N: the same data-parallel replicas where N splits
    into them, else one TP group of N."""
    tp = int(resolved.recipe.serve.arg("tensor_parallel_size", 1) or 1)
    dp = int(resolved.recipe.serve.arg("data_parallel_size", 1) or 1)
    if gpus:
        tp, dp = (gpus // dp, dp) if dp > 1 and gpus % dp == 0 else (gpus, 1)
    return tp, dp


def _version(text) -> tuple[int, ...] | None:
    parts = []
    for piece in str(text or "").split("."):
        digits = "".join(c for c in piece if c.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


def _async_scheduling(resolved, spec: dict | None) -> bool:
    """vLLM's default: on, unless speculative decoding uses a method it cannot overlap."""
    explicit = resolved.recipe.serve.arg("async_scheduling")
    if isinstance(explicit, bool):
        return explicit
    method = (spec or {}).get("method")
    return method is None or method in ASYNC_SPEC_METHODS


def setup_for(resolved, *, gpus=None, ctx=None, seqs=None, platform=None, device_mib=None) -> Setup:
    r = resolved.recipe
    plat_id = r.hardware.platform if platform is None else platform  # '' is a platform asked for, and refused
    plat = platforms.CATALOGUE.get(plat_id)
    if plat is None:
        raise CookbookError(
            f"--platform {plat_id!r}: not in the platform catalogue",
            help="one of: " + ", ".join(sorted(platforms.CATALOGUE)),
            exit_code=BAD_INPUT,
        )
    if device_mib:
        device_bytes, device_source = int(device_mib) * MIB, "--device-mib"
    elif plat.id == "cpu":
        host = r.hardware.min_host_memory_gib or platforms.detect().host_memory_gib
        device_bytes, device_source = int(host * GIB), "host RAM (the cpu platform's memory)"
    elif plat.device_mib:
        device_bytes, device_source = plat.device_mib * MIB, platforms.DEVICE_MIB[plat.id][1]
    else:
        device_bytes, device_source = int((plat.memory_gib or 0) * GIB), "the catalogue's memory_gib"
    tp, dp = split_gpus(resolved, gpus)
    big = device_bytes >= 70 * GIB
    env = {k: str(v.value) for k, v in r.env.items()}
    graph_frac = _env_number(r.env, "VLLM_GRAPH_RESERVED_MEM", None) if plat.id == "gaudi2" else None
    spec = _mapping(resolved.recipe.serve.arg("speculative_config"), "speculative_config")
    engine = r.image.engine.package if r.image and r.image.engine else "vllm"
    version = _version(r.image.engine.version) if r.image and r.image.engine else None
    eager = bool(resolved.recipe.serve.arg("enforce_eager", False))
    graphs_first = (
        engine == "vllm"
        and version is not None
        and version >= GRAPHS_BEFORE_POOL_SINCE
        and plat.id not in ("cpu", "gaudi2")
        and not eager
        and env.get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "1") != "0"
    )
    block = resolved.recipe.serve.arg("block_size")
    return Setup(
        platform=plat.id,
        device_bytes=device_bytes,
        device_source=device_source,
        tp=tp,
        dp=dp,
        dcp=int(resolved.recipe.serve.arg("decode_context_parallel_size", 1) or 1),
        expert_parallel=bool(resolved.recipe.serve.arg("enable_expert_parallel", False)),
        gpus=gpus or r.hardware.gpus or 1,
        max_model_len=int(
            ctx or resolved.recipe.serve.arg("max_model_len") or r.model.architecture.native_context_tokens or 4096
        ),
        max_num_seqs=int(seqs or resolved.recipe.serve.arg("max_num_seqs") or (1024 if big else 256)),
        max_num_batched_tokens=int(resolved.recipe.serve.arg("max_num_batched_tokens") or (8192 if big else 2048)),
        gpu_memory_utilization=float(resolved.recipe.serve.arg("gpu_memory_utilization", 0.9)),
        kv_cache_dtype=str(resolved.recipe.serve.arg("kv_cache_dtype", "auto")),
        model_dtype=resolved.recipe.serve.arg("dtype"),
        speculative=spec,
        explicit_kv_bytes=resolved.recipe.serve.arg("kv_cache_memory_bytes"),
        plan_sets_kv_bytes=bool(r.plan and r.plan.explicit_kv_bytes),
        graph_reserved_fraction=float(graph_frac) if graph_frac else None,
        indexer_logits_mb=int(_env_number(r.env, "VLLM_SPARSE_INDEXER_MAX_LOGITS_MB", DEFAULT_INDEXER_LOGITS_MB)),
        moe_chunk=int(env["VLLM_MOE_CHUNK"]) if env.get("VLLM_MOE_CHUNK", "").isdigit() else None,
        enforce_eager=eager,
        engine=engine,
        engine_version=version,
        block_size=int(block) if isinstance(block, int) and not isinstance(block, bool) else None,
        async_scheduling=_async_scheduling(resolved, spec),
        graphs_before_pool=graphs_first,
        ep_kv_cut_bytes=_ep_kv_cut(r, bool(resolved.recipe.serve.arg("enable_expert_parallel", False))),
    )


def _ep_kv_cut(r, expert_parallel: bool) -> int:
    """The launcher's own KV-budget cut under expert parallelism (SlimServe's --ep: 12 GiB)."""
    cut = r.plan.expert_parallel_kv_cut_gib if r.plan and r.plan.explicit_kv_bytes else None
    return int(cut * GIB) if cut and expert_parallel else 0


# What every checkpoint of one model shares (layers do not: architecture-faithful test checkpoints cut them).
IDENTITY = ("attention_heads", "hidden_size", "vocab_size")


def _same_model(checkpoint, arch, meta: dict) -> None:
    """Refuse a checkpoint whose header contradicts the recipe's architecture (a Gemma GGUF planned
    as GLM-5.2): its tensors would be counted as the recipe's model."""
    clash = [
        f"{k} {getattr(arch, k):,} (recipe) against {meta[k]:,} (checkpoint)"
        for k in IDENTITY
        if isinstance(meta.get(k), int) and isinstance(getattr(arch, k, None), int) and getattr(arch, k) != meta[k]
    ]
    if clash:
        raise CookbookError(
            f"--checkpoint {checkpoint}: not this recipe's model: " + "; ".join(clash),
            help="pass the checkpoint the recipe serves, or plan the recipe for that model",
            exit_code=BAD_INPUT,
        )


def load_checkpoint(path: Path, geom_arch):
    """(weights, file geometry) from a GGUF file, a safetensors file, or a folder of shards."""
    from cookbook.convert.safetensors_io import read_header
    from cookbook.gguf.reader import read_gguf

    path = Path(path)
    if not path.exists():
        raise CookbookError(
            f"--checkpoint {path}: no such file or folder",
            help="pass a .gguf file, a .safetensors file or a folder of them",
            exit_code=BAD_INPUT,
        )
    if path.is_dir():
        files = sorted(path.glob("*.gguf")) or sorted(path.glob("*.safetensors"))
        if not files:
            raise CookbookError(
                f"--checkpoint {path}: the folder holds no .gguf or .safetensors file",
                help="point at the checkpoint's folder or one of its files",
                exit_code=BAD_INPUT,
            )
        if files[0].suffix == ".gguf":
            if len(files) > 1:
                raise CookbookError(
                    f"--checkpoint {path}: {len(files)} GGUF files; the plan reads one",
                    help="join the shards first (`cookbook convert gguf-join`) or name one file",
                    exit_code=BAD_INPUT,
                )
            path = files[0]
    else:
        files = [path]
    try:  # a FIFO or device would block the header read forever: inputs are regular files
        for f in files if path.is_dir() else [path]:
            check_regular(f)
    except OSError as e:
        raise CookbookError(
            f"--checkpoint {e.filename}: {e.strerror}",
            help="pass a .gguf file, a .safetensors file or a folder of them",
            exit_code=BAD_INPUT,
        ) from None
    if path.is_file() and path.suffix == ".gguf" or _is_gguf(path):
        g = read_gguf(path, decode_arrays=True, check_data=True)
        meta = G.gguf_meta(g)
        layers = meta.get("layers") or geom_arch.layers
        return W.from_gguf(g, layers), meta
    tables = [read_header(f)[0] for f in files]
    meta = {}
    cfg = (files[0].parent / "config.json") if files else None
    if cfg and cfg.exists():
        try:
            config = loads_json(read_regular(cfg, 16 << 20), what="config.json")
            if not isinstance(config, dict):
                raise ValueError("not a JSON object")
            meta = G.safetensors_config_meta(config)
            meta["sources"] = [f"{cfg}"]
        except (ValueError, OSError) as e:
            raise CookbookError(
                f"{cfg}: not a JSON config ({e})",
                help="fix or remove the config.json beside the checkpoint",
                exit_code=BAD_INPUT,
            ) from None
    layers = meta.get("layers") or geom_arch.layers
    return W.from_safetensors(files, tables, layers), meta


def _is_gguf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def _per_gpu(weights: W.Weights, s: Setup) -> dict[str, int]:
    out = {}
    for name, g in weights.groups.items():
        ways = s.tp * (s.dp if s.expert_parallel and name == "routed_experts" else 1)
        out[name] = -(-g.bytes // ways)
    return out


def _activation(geom: G.Geometry, s: Setup) -> int:
    a = geom.arch
    h = a.hidden_size or 4096
    t = s.max_num_batched_tokens
    ffn = (a.intermediate_size or 4 * h) / s.tp
    if a.routed_experts and a.moe_intermediate_size and a.experts_per_token:
        ffn = max(ffn, a.experts_per_token * (3 * a.moe_intermediate_size / s.tp + h))
    moe_t = min(t, s.moe_chunk) if s.moe_chunk else t
    hidden_states = t * 2 * 6 * h + moe_t * 2 * 2 * ffn
    sampler = min(s.max_num_seqs, t) * (a.vocab_size or 128000) * 4 * SAMPLER_COPIES
    return int(hidden_states + sampler)


def _workspace(geom: G.Geometry, s: Setup, ctx: int) -> int:
    """Buffers that grow with max_model_len and that vLLM's profile run does not see."""
    a = geom.arch
    if not a.indexer:
        return 0
    latent = (a.kv_lora_rank or a.head_dim or 512) + (a.qk_rope_head_dim or 0)
    gather = 2 * ctx * latent * 2 / s.dcp  # one sequence's latent dequantized to BF16, twice
    index_keys = ctx * (a.indexer.head_dim + 4)
    logits = min(s.max_num_batched_tokens * ctx * 4, s.indexer_logits_mb * MIB)
    topk = s.max_num_batched_tokens * (a.indexer.topk or 2048) * 4
    return int(gather + index_keys + logits + topk)


def make_plan(
    resolved, *, gpus=None, ctx=None, seqs=None, checkpoint=None, config=None, platform=None, device_mib=None
) -> Plan:
    """`checkpoint`: a file or folder whose tensors are counted and whose header fills the geometry
    where the recipe is silent; `config`: a checkpoint's config.json (as read) that only fills the
    geometry, the weights staying the recipe's size."""
    r = resolved.recipe
    s = setup_for(resolved, gpus=gpus, ctx=ctx, seqs=seqs, platform=platform, device_mib=device_mib)
    weights, geom = _weights_and_geometry(resolved, checkpoint, config)
    kv = _kv_per_token(resolved, geom, s)
    res = _reserves(r, s, geom, weights, kv)
    pool, ws = res.pool_at(s.max_model_len)
    need_one = kv.bytes_for_sequence(s.max_model_len)
    refusals, warnings = _pool_refusals(s, res, pool, ws, need_one)
    per_token = kv.vllm_bytes_per_token(s.max_model_len)
    max_seqs = int(pool // need_one) if need_one else 0
    logged_one = kv.logged_bytes_for_sequence(s.max_model_len)
    refusals += _fit_refusals(s, res, kv, pool, ws, max_seqs) if not refusals else []
    full_length, typical = _concurrency(kv, pool, s, r.plan.traffic if r.plan else None)
    return Plan(
        slug=resolved.slug,
        quant=resolved.quant,
        setup=s,
        geometry=geom,
        weights=weights,
        weights_per_gpu=res.per_gpu,
        draft_weights_per_gpu=res.draft_bytes,
        kv=kv,
        activation_bytes=res.act,
        non_torch_bytes=res.non_torch,
        workspace_bytes=ws,
        graph_bytes=res.graphs,
        requested_bytes=res.requested,
        # what gpu_memory_utilization alone would give
        vllm_pool_bytes=pool if s.platform == "cpu" else res.base_pool(),
        pool_bytes=pool,
        pool_tokens=int(pool // per_token) if per_token else 0,
        seq_bytes_at_ctx=need_one,
        max_seqs_at_ctx=max_seqs,
        max_ctx_at_seqs=_largest_ctx(
            kv, res.pool_at, s.max_num_seqs, geom.arch.native_context_tokens or s.max_model_len, _own_in_flight(s)
        ),
        logged_seqs_at_ctx=pool / logged_one if logged_one else 0.0,
        full_length=full_length,
        typical=typical,
        traffic=r.plan.traffic if r.plan else None,
        refusals=refusals,
        warnings=warnings + weights.notes + kv.notes,
        assumptions=_assumptions(s, geom, kv, res),
    )


def _weights_and_geometry(resolved, checkpoint, config) -> tuple[W.Weights, G.Geometry]:
    """The weights (a checkpoint's tensors counted, else the recipe's size spread over the geometry)
    and the geometry (the recipe's, filled from the checkpoint's header or config.json)."""
    r = resolved.recipe
    arch = r.model.architecture
    if checkpoint:
        weights, meta = load_checkpoint(Path(checkpoint), arch)
        _same_model(checkpoint, arch, meta)
        return weights, G.from_recipe(arch, meta)
    geom = G.from_recipe(arch, G.safetensors_config_meta(config) if config else None)
    quant = r.quants.get(resolved.quant) if resolved.quant else None
    size = (quant.size_gib if quant else None) or r.model.source.size_gib
    return W.from_recipe(geom, size, r.model.format), geom


def _kv_per_token(resolved, geom: G.Geometry, s: Setup) -> K.KV:
    try:
        return K.per_token(
            geom,
            tp=s.tp,
            kv_dtype=s.kv_cache_dtype,
            model_dtype=s.model_dtype,
            dcp=s.dcp,
            spec=s.speculative,
            # vllm-gaudi allocates the DSA indexer-key buffers after its memory profiling (seed 002)
            indexer_in_pool=s.platform != "gaudi2",
            sparse_fp8_ds_mla=s.stock_vllm_layout and platforms.CATALOGUE[s.platform].arch == "sm90",
            vllm_dsv4_layout=s.stock_vllm_layout,
            block_size=s.block_size,
            in_flight_tokens=s.in_flight_tokens,
        )
    except ValueError as e:
        raise CookbookError(
            f"cannot plan {resolved.slug}: {e}", help="use a kv_cache_dtype vLLM knows", exit_code=BAD_INPUT
        ) from None


@dataclass(frozen=True)
class _Reserves:
    """What one GPU gives before the KV pool (weights, activation peak, non-torch memory, CUDA
    graphs), and the pool and workspaces that leaves at a max_model_len."""

    s: Setup
    geom: G.Geometry
    kv: K.KV
    env: dict
    per_gpu: dict[str, int]
    draft_bytes: int
    act: int
    non_torch: int
    graphs: int

    @property
    def weights_bytes(self) -> int:
        return sum(self.per_gpu.values()) + self.draft_bytes

    @property
    def requested(self) -> int:
        return int(self.s.device_bytes * self.s.gpu_memory_utilization)

    def base_pool(self) -> int:
        s = self.s
        base = self.requested - self.weights_bytes - self.act - self.non_torch
        base -= self.graphs if s.graphs_before_pool else 0
        if s.graph_reserved_fraction is not None:
            base = int(base * (1 - s.graph_reserved_fraction))
        return base

    def pool_at(self, ctx_len: int) -> tuple[int, int]:
        """(the pool the plan counts on, the workspaces) at this max_model_len."""
        s, kv = self.s, self.kv
        ws = _workspace(self.geom, s, ctx_len)
        if kv.outside_pool_bytes_per_token and kv.bytes_per_token:
            ws += int(self.base_pool() / kv.bytes_per_token * kv.outside_pool_bytes_per_token)
        if s.platform == "cpu":
            space = _env_number(self.env, "VLLM_CPU_KVCACHE_SPACE", 4.0)
            return int(space * GIB), ws
        if s.explicit_kv_bytes:
            return int(s.explicit_kv_bytes), ws
        if s.plan_sets_kv_bytes:
            p = int(s.device_bytes * (1 - EXPLICIT_MARGIN)) - self.weights_bytes - self.act - self.non_torch - ws
            p -= self.graphs + s.ep_kv_cut_bytes
            return p // MIB * MIB, ws
        return self.base_pool(), ws


def _reserves(r, s: Setup, geom: G.Geometry, weights: W.Weights, kv: K.KV) -> _Reserves:
    draft = geom.arch.draft
    drafting = draft and (s.speculative or {}).get("method") in K.DRAFT_METHODS
    return _Reserves(
        s=s,
        geom=geom,
        kv=kv,
        env=r.env,
        per_gpu=_per_gpu(weights, s),
        draft_bytes=int((draft.size_gib or 0) * GIB) if drafting else 0,
        act=_activation(geom, s),
        non_torch=NON_TORCH_BYTES + (NCCL_BYTES if s.tp > 1 else 0),
        graphs=0 if s.enforce_eager or s.platform in ("cpu", "gaudi2") else CUDA_GRAPH_BYTES,
    )


def _pool_refusals(s: Setup, res: _Reserves, pool: int, ws: int, need_one: int) -> tuple[list[str], list[str]]:
    """(refusals, warnings): the reserves past the memory vLLM may use, a pool short of one sequence,
    workspaces past the headroom, an explicit pool past the device."""
    refusals, warnings = [], []
    fixed = res.weights_bytes + res.act + res.non_torch
    limit, limit_is = (
        (s.device_bytes, "the device's")
        if s.plan_sets_kv_bytes or s.explicit_kv_bytes
        else (res.requested, f"the {s.gpu_memory_utilization:g} x {gib(s.device_bytes)} vLLM may use:")
    )
    if s.platform != "cpu" and fixed >= limit:
        refusals.append(
            f"the weights ({gib(res.weights_bytes)} per GPU) with the activation peak ({gib(res.act)}) and non-torch "
            f"memory ({gib(res.non_torch)}) exceed {limit_is} {gib(limit)}"
        )
    elif res.kv.parts and pool < need_one:
        refusals.append(
            f"one sequence of {s.max_model_len:,} tokens needs {gib(need_one)} of KV per GPU; the pool is {gib(pool)}"
        )
    headroom = s.device_bytes - res.requested
    late_graphs = 0 if s.graphs_before_pool else res.graphs
    if not s.explicit_kv_bytes and not s.plan_sets_kv_bytes and s.platform != "cpu" and ws + late_graphs > headroom:
        warnings.append(
            f"the workspaces that grow with max_model_len ({gib(ws)})"
            + (f" and CUDA graphs ({gib(res.graphs)})" if late_graphs else "")
            + " are allocated after vLLM sizes the pool; the headroom left by gpu_memory_utilization "
            f"{s.gpu_memory_utilization:g} is {gib(headroom)}: expect an out-of-memory error mid-run"
        )
    if s.explicit_kv_bytes and s.platform != "cpu":
        total = fixed + ws + res.graphs + int(s.explicit_kv_bytes)
        if total > s.device_bytes:
            refusals.append(
                f"--kv-cache-memory-bytes {int(s.explicit_kv_bytes):,} with the weights, reserves and workspaces "
                f"needs {gib(total)} per GPU; the device has {gib(s.device_bytes)}"
            )
    return refusals, warnings


def _fit_refusals(s: Setup, res: _Reserves, kv: K.KV, pool: int, ws: int, max_seqs: int) -> list[str]:
    """What the pool checks above let through: a CPU host too small for it all, no sequence at all."""
    cpu_total = res.weights_bytes + res.act + res.non_torch + ws + pool
    if s.platform == "cpu" and cpu_total > s.device_bytes:  # never a negative "left"
        return [
            f"the KV cache ({gib(pool)}, VLLM_CPU_KVCACHE_SPACE) with the weights ({gib(res.weights_bytes)}), "
            f"activation peak and non-torch memory needs {gib(cpu_total)}; the host has {gib(s.device_bytes)}"
        ]
    if kv.parts and max_seqs < 1:  # nothing fits: never a plan that exits 0
        return [f"not one sequence of {s.max_model_len:,} tokens fits the KV pool of {gib(pool)}"]
    return []


def _assumptions(s: Setup, geom: G.Geometry, kv: K.KV, res: _Reserves) -> list[str]:
    graphs = res.graphs
    out = [
        f"device memory {gib(s.device_bytes)}: {s.device_source}",
        f"activation peak {gib(res.act)}: {s.max_num_batched_tokens:,} batched tokens through the widest layer, "
        f"plus the dummy sampler run over min(max_num_seqs, batched tokens) rows of fp32 logits x{SAMPLER_COPIES}",
        f"non-torch memory {gib(res.non_torch)}" + (" (NCCL buffers included)" if s.tp > 1 else ""),
    ]
    if graphs and s.graphs_before_pool:
        out.append(
            f"CUDA graphs {gib(graphs)}, vLLM's estimate taken before the pool (vLLM 0.21+; not modelled: "
            "vLLM 0.26.0 estimated 0.75 GiB for DeepSeek-V4-Flash at 8 layers, 4.39 GiB for GLM-5.2 with MTP)"
        )
    elif graphs:
        out.append(f"CUDA graphs {gib(graphs)}, captured after the pool: out of the headroom")
    if kv.layout is not None:
        lay = kv.layout
        out.append(
            f"DeepSeek-V4 in vLLM 0.26's layout (plan/dsv4_layout.py): {len(lay.groups)} KV-cache groups padded to "
            f"{lay.num_layer_tuples} layer tuples of {lay.layer_tuple_bytes:,} B, blocks of {lay.block_bytes:,} B; a "
            "sequence is charged vLLM's worst case (_max_memory_usage_bytes_from_groups: whole blocks, the sliding "
            "groups' pages for the tokens in flight), more than its 'Maximum concurrency' log line charges"
        )
    if any(p.window for p in kv.parts):
        out.append(
            f"sliding windows reserved per sequence with {s.in_flight_tokens:,} tokens in flight "
            f"(max_num_batched_tokens x {2 if s.async_scheduling else 1}"
            + (", async scheduling" if s.async_scheduling else "")
            + ")"
        )
    if s.ep_kv_cut_bytes:
        out.append(
            f"expert parallelism: the explicit pool gives up {gib(s.ep_kv_cut_bytes)} for the extra EP overhead, "
            "as the recipe's launcher does (plan.expert_parallel_kv_cut_gib)"
        )
    if s.graph_reserved_fraction is not None:
        out.append(
            f"Gaudi: VLLM_GRAPH_RESERVED_MEM={s.graph_reserved_fraction:g} of the memory left after the weights "
            "and the profile run is kept for HPU graphs"
        )
    if geom.filled_from_file:
        out.append("from the checkpoint's header: " + ", ".join(sorted(geom.filled_from_file)))
    return out


def _concurrency(kv: K.KV, pool: int, s: Setup, traffic) -> tuple[C.Concurrency | None, C.Concurrency | None]:
    """The two concurrency figures: full-length sequences, and the typical request (capped at
    max_model_len), each with the batch's in-flight tokens counted once (plan/concurrency.py)."""
    own = _own_in_flight(s)
    full = C.at_length(kv, pool, s.max_model_len, own)
    typical = None
    if traffic is not None:
        typical = C.at_length(kv, pool, min(traffic.prompt_tokens + traffic.output_tokens, s.max_model_len), own)
    return full, typical


def _own_in_flight(s: Setup) -> int:
    spec_tokens = int((s.speculative or {}).get("num_speculative_tokens") or 0)
    return C.decode_in_flight(2 if s.async_scheduling else 1, spec_tokens)


def _largest_ctx(kv: K.KV, pool_at, seqs: int, ceiling: int, own_in_flight: int = 0) -> int:
    """Largest max_model_len at which `seqs` full-length sequences run at once (plan/concurrency.py:
    the batch's in-flight window pages counted once), vLLM's start-up check for one sequence passing
    too (workspaces grow with it)."""
    if not kv.parts:
        return 0

    def fits(n: int) -> bool:
        pool, _ = pool_at(n)
        if kv.bytes_for_sequence(n) > pool:
            return False
        c = C.at_length(kv, pool, n, own_in_flight)
        return c is not None and c.seqs >= seqs

    lo, hi = 0, max(ceiling, 1)
    if fits(hi):
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
