"""What the mxfp4-moe tools share: test data, routings, CUDA-graph timing, bandwidth references
and the checks that refuse bad arguments before any GPU work.

Heavy imports (torch, triton) happen inside the functions, so a bad argument is refused fast.
"""

from __future__ import annotations

ROTATIONS = 8  # routings a timed call rotates over, so no two consecutive calls read the same experts from L2


def parse_ab(spec: str) -> list[tuple[str, dict]]:
    """ "a=fuse:true,prefetch:2;b=..." -> [("a", {"fuse": True, "prefetch": 2}), ...] (LaunchConfig fields)."""
    from dataclasses import fields

    from cookbook.kernels.mxfp4_moe import LaunchConfig

    types = {f.name: f.type for f in fields(LaunchConfig)}
    out = []
    for item in filter(None, (x.strip() for x in spec.split(";"))):
        name, _, body = item.partition("=")
        change = {}
        for kv in filter(None, body.split(",")):
            key, _, val = kv.partition(":")
            if key not in types:
                raise ValueError(f"{item!r}: {key!r} is not a LaunchConfig field ({', '.join(types)})")
            kind = types[key]
            if kind == "bool" and val not in ("true", "false"):
                raise ValueError(f"{item!r}: {key} takes true or false, got {val!r}")
            change[key] = val == "true" if kind == "bool" else int(val) if kind == "int" else val
        if not name or not change:
            raise ValueError(f"{item!r}: expected NAME=key:value[,key:value]")
        out.append((name, change))  # checked once merged into each shipped entry
    return out


def log(msg: str) -> None:
    print(msg, flush=True)


def make_experts(shape, seed: int):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    e, h, i = shape.experts, shape.hidden, shape.intermediate

    def rnd(*size, lo=0, hi=256):
        return torch.randint(lo, hi, size, dtype=torch.uint8, device="cuda", generator=g)

    # scale bytes 118..124 = 2**-9 .. 2**-3: the range of real expert weights
    return (
        rnd(e, 2 * i, h // 2),
        rnd(e, 2 * i, h // 32, lo=118, hi=125),
        rnd(e, h, i // 2),
        rnd(e, h, i // 32, lo=118, hi=125),
    )


def usage_error(script: str, variants: list[str]) -> str | None:
    """Why a benchmark script cannot run here (an unknown variant, no CUDA GPU), or None."""
    import torch

    from cookbook.kernels.mxfp4_moe import VARIANTS

    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        return f"{script}: unknown variant(s) {bad}; choose from {sorted(VARIANTS)}"
    if not torch.cuda.is_available():
        return f"{script}: needs a CUDA GPU (the CPU interpreter is for tests only)"
    return None


def set_and_usage(script: str, set_spec: str, variants: list[str]) -> tuple[dict, str | None]:
    """`--set key:value,...` as LaunchConfig changes, and why the script cannot run (`usage_error`,
    or a bad --set), or None."""
    try:
        change = dict(parse_ab(f"set={set_spec}")[0][1]) if set_spec else {}
    except ValueError as exc:
        return {}, f"{script}: --set: {exc}"
    return change, usage_error(script, variants)


def distinct_experts(routs) -> float:
    """Mean number of distinct experts a routing of `make_routings` names: the experts a call reads."""
    import torch

    return sum(len(torch.unique(ids)) for _, ids in routs) / len(routs)


def make_routings(shape, tokens: int, n: int, seed: int):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    out = []
    for _ in range(n):
        logits = torch.rand(tokens, shape.experts, device="cuda", generator=g)
        w, ids = logits.topk(shape.top_k, dim=1)
        out.append((torch.softmax(w, 1).float().contiguous(), ids.to(torch.int32).contiguous()))
    return out


def read_kernel():
    """A Triton streaming read: program p reads int32 [p * n_per, (p + 1) * n_per) of src (< n) and
    writes their XOR, so nothing but the read costs time."""
    import triton
    import triton.language as tl

    @triton.jit
    def _read(src, out, n, n_per: tl.constexpr):
        base = tl.program_id(0).to(tl.int64) * n_per
        acc = tl.zeros([2048], tl.int32)
        for i in range(0, n_per, 2048):
            offs = base + i + tl.arange(0, 2048)
            acc ^= tl.load(src + offs, mask=offs < n, other=0)
        tl.store(out + tl.program_id(0), tl.xor_sum(acc, 0))

    return _read


def read_bandwidth() -> float:
    """Bytes/s of a plain streaming read (`read_kernel`, 1 GiB, every byte once): what reading
    alone reaches on this card, for context next to the copy figure."""
    import torch
    import triton.testing

    kernel = read_kernel()
    n_per = 1 << 16  # int32 per program: 256 KiB
    src = torch.ones(1 << 28, dtype=torch.int32, device="cuda")
    out = torch.empty(src.numel() // n_per, dtype=torch.int32, device="cuda")
    ms = triton.testing.do_bench(lambda: kernel[(out.numel(),)](src, out, src.numel(), n_per=n_per, num_warps=8))
    del src
    torch.cuda.empty_cache()
    return 4 * (1 << 28) / (ms * 1e-3)


def copy_bandwidth() -> float:
    import torch
    import triton.testing

    n = 4 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median")
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / (ms * 1e-3)


def graph_time(fn, n_calls: int, replays: int = 20) -> float:
    """Seconds per call: fn(r) for r in range(n_calls) captured in one CUDA graph, replayed."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for r in range(n_calls):  # compile + warm outside the capture
            fn(r)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for r in range(n_calls):
            fn(r)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3 / n_calls)
    del g
    times.sort()
    return times[len(times) // 2]


def event_time(fn, reps: int = 3) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    times.sort()
    return times[len(times) // 2]
