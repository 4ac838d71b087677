"""Host side of the fused MXFP4 MoE: input checks, buffers, launches.

Layout (what the converter writes; vLLM's FusedMoE parameters):
  w13_packed uint8 [E, 2I, H/2]  rows 0..I-1 = gate_proj, I..2I-1 = up_proj; byte k holds
                                 elements 2k (low nibble) and 2k+1 (high nibble)
  w13_scales uint8 [E, 2I, H/32] E8M0, one per 32 elements along H
  w2_packed  uint8 [E, H, I/2],  w2_scales uint8 [E, H, I/32]
  x bf16 [T, H]; topk_ids int [T, k]; topk_weights float [T, k] -> out bf16 [T, H]
"""

from __future__ import annotations

import math
import os

from .config import DECODERS, LaunchConfig

MAX_TOKENS = 256  # the align kernel sorts all T*k pairs in one program
MAX_PAIRS = 4096
WORKSPACE_COUNTERS = 1 << 16  # direct: w13 tiles (pairs x I / block_n1) and w2 column tiles, with room
WIDE_ABOVE = 128  # scale bytes above this (block scales >= 2**2) need the two-multiply decoder


class MoEInputError(ValueError):
    """Inputs the kernel cannot take (shape, dtype, device, ranges)."""


def _interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def check_inputs(
    x, w13_packed, w13_scales, w2_packed, w2_scales, topk_weights, topk_ids
) -> tuple[int, int, int, int, int]:
    import torch

    def need(cond: bool, msg: str) -> None:
        if not cond:
            raise MoEInputError(msg)

    need(x.dim() == 2 and x.dtype == torch.bfloat16, f"x must be bf16 [T, H], got {x.dtype} {tuple(x.shape)}")
    t, h = x.shape
    need(
        w13_packed.dim() == 3 and w13_packed.dtype == torch.uint8,
        f"w13_packed must be uint8 [E, 2I, H/2], got {w13_packed.dtype} {tuple(w13_packed.shape)}",
    )
    e, two_i, h2 = w13_packed.shape
    i = two_i // 2
    need(two_i % 2 == 0 and h2 * 2 == h, f"w13_packed {tuple(w13_packed.shape)} does not match H={h} ([E, 2I, H/2])")
    need(h % 32 == 0 and i % 32 == 0, f"H={h} and I={i} must be multiples of 32 (MXFP4 block)")
    need(
        tuple(w13_scales.shape) == (e, two_i, h // 32) and w13_scales.dtype == torch.uint8,
        f"w13_scales must be uint8 {(e, two_i, h // 32)}, got {w13_scales.dtype} {tuple(w13_scales.shape)}",
    )
    need(
        tuple(w2_packed.shape) == (e, h, i // 2) and w2_packed.dtype == torch.uint8,
        f"w2_packed must be uint8 {(e, h, i // 2)}, got {w2_packed.dtype} {tuple(w2_packed.shape)}",
    )
    need(
        tuple(w2_scales.shape) == (e, h, i // 32) and w2_scales.dtype == torch.uint8,
        f"w2_scales must be uint8 {(e, h, i // 32)}, got {w2_scales.dtype} {tuple(w2_scales.shape)}",
    )
    need(
        topk_ids.dim() == 2 and topk_ids.shape[0] == t and not topk_ids.is_floating_point(),
        f"topk_ids must be an integer [T={t}, k] tensor, got {topk_ids.dtype} {tuple(topk_ids.shape)}",
    )
    k = topk_ids.shape[1]
    need(
        tuple(topk_weights.shape) == (t, k) and topk_weights.is_floating_point(),
        f"topk_weights must be float [T={t}, k={k}], got {topk_weights.dtype} {tuple(topk_weights.shape)}",
    )
    need(
        1 <= t <= MAX_TOKENS and t * k <= MAX_PAIRS,
        f"{t} tokens x top-{k}: this decode kernel takes 1..{MAX_TOKENS} tokens and at most {MAX_PAIRS} pairs",
    )
    dev = x.device
    for name, ten in (
        ("w13_packed", w13_packed),
        ("w13_scales", w13_scales),
        ("w2_packed", w2_packed),
        ("w2_scales", w2_scales),
        ("topk_ids", topk_ids),
        ("topk_weights", topk_weights),
    ):
        need(ten.device == dev, f"{name} is on {ten.device}, x on {dev}")
        need(ten.is_contiguous(), f"{name} must be contiguous")
    need(x.is_contiguous(), "x must be contiguous")
    return t, h, i, e, k


def check_swiglu_limit(swiglu_limit) -> float:
    """The clamp as the kernels' LIMIT: 0.0 for None (no clamp), else a positive finite float."""
    if swiglu_limit is None:
        return 0.0
    ok = isinstance(swiglu_limit, (int, float)) and not isinstance(swiglu_limit, bool)
    if not ok or not math.isfinite(swiglu_limit) or swiglu_limit <= 0:
        raise MoEInputError(f"swiglu_limit must be None or a positive finite number, got {swiglu_limit!r}")
    return float(swiglu_limit)


_SIDE_STREAMS: dict = {}


def _on_streams(launch, p: int, n: int, dev) -> None:
    """launch(pair0, count) for n contiguous parts of the p pairs: the first on the current stream, each
    other on a side stream forked from it and joined back (CUDA graphs capture the fork and the join), so
    one part's w13 and w2 run in another's ramp and tail instead of after a launch's last program.
    The call's buffers come from the current stream and the join orders all later work on it after the
    side streams', so they need no record_stream. The side streams are one set per device: calls made on
    two streams at once are ordered through them (correct, not concurrent)."""
    import torch

    main = torch.cuda.current_stream(dev)
    sides = _SIDE_STREAMS.setdefault(str(dev), [])
    while len(sides) < n - 1:
        sides.append(torch.cuda.Stream(dev))
    bounds = [j * p // n for j in range(n + 1)]
    for side in sides[: n - 1]:
        side.wait_stream(main)
    launch(0, bounds[1])
    for j, side in enumerate(sides[: n - 1], start=1):
        with torch.cuda.stream(side):
            launch(bounds[j], bounds[j + 1] - bounds[j])
    for side in sides[: n - 1]:
        main.wait_stream(side)


def fused_moe_mxfp4(
    x,
    w13_packed,
    w13_scales,
    w2_packed,
    w2_scales,
    topk_weights,
    topk_ids,
    config: LaunchConfig | None = None,
    check_ids: bool = True,
    scale_max: int | None = None,
    layout: str = "converter",
    trace: dict | None = None,
    workspace=None,
    swiglu_limit: float | None = None,
):
    """Routed-expert MoE on MXFP4 weights: out[t] = sum_j w[t,j] * W2_e (silu(Wg_e x) * (Wu_e x)).

    check_ids=True verifies 0 <= topk_ids < E (one device sync); pass False in graphs.
    scale_max: the largest E8M0 byte in w13_scales and w2_scales (compute it once per model
    with `scale_byte_max`); <= 128 selects the one-multiply decoder. None computes it here.
    layout: "converter" (the tensors as written) or "frag" (all four passed through
    `prepare.prepare_experts` once, at load time; decoders fp32 and asm only; the fast one).
    trace: a dict (kernel 'gluon' only) that receives "w13" and "w2": int64 [programs, 4] tensors of each
    program's start, end of its K loop (0: it had no tile), end (ns, the GPU's global clock) and SM,
    filled when the kernels run (`tools/timeline.py`); the kernels are built apart for it.
    workspace: from `moe_workspace(device)`, zeros that the kernels leave zeroed (the last program at
    each counter resets it). With it a `direct` entry needs no counter fill before its launches (about
    1 us of 33-88 at one token: measured 1.01-1.05x there); without it each such call fills fresh counters. Calls that share one
    workspace must run one after another (one stream, or ordered by events), never at once. A workspace
    passed is checked (1-D int32 on x's device) whether or not this call's entry uses it.
    swiglu_limit: None (plain SiLU-and-multiply) or a positive finite float L: vLLM's
    SiluAndMulWithClamp semantics, silu(min(gate, L)) * clamp(up, -L, L) in float32
    (DeepSeek-V4's experts, L = config.swiglu_limit). Each value compiles its own kernels.
    """
    import torch

    from . import triton_kernels as K

    t, h, i, e, k = check_inputs(x, w13_packed, w13_scales, w2_packed, w2_scales, topk_weights, topk_ids)
    limit = check_swiglu_limit(swiglu_limit)
    cfg = config or LaunchConfig()
    cfg.check("launch config")
    if i % cfg.block_k2 or h % cfg.block_k1:
        raise MoEInputError(f"H={h} must be a multiple of block_k1={cfg.block_k1} and I={i} of block_k2={cfg.block_k2}")
    interpret = _interpret()
    decode = DECODERS.index(cfg.decoder)
    frag = _check_layout(layout, decode)
    gluon = cfg.kernel == "gluon"
    if gluon:  # its own check covers the BF16x2 decoder it runs
        if not frag:
            raise MoEInputError("kernel 'gluon' reads the frag layout: pass layout='frag' (prepare_experts first)")
        reason = gluon_unsupported(*_gluon_facts(x.device, interpret))
        if reason:
            raise MoEInputError(f"kernel 'gluon' {reason}: use a table entry with kernel 'triton' (block_t 16)")
    if trace is not None and not gluon:
        raise MoEInputError("trace: only the Gluon kernels record a timeline (use a table entry with kernel 'gluon')")
    if frag:
        _check_frag_blocks(cfg, h, i)
    if decode and interpret:
        raise MoEInputError(f"decoder {cfg.decoder!r} needs a GPU; the CPU interpreter runs decoder 'fp32'")
    if cfg.decoder in BF16X2_DECODERS and not gluon:
        _check_bf16x2(f"decoder {cfg.decoder!r}", x.device)
    if check_ids:
        lo, hi = int(topk_ids.min()), int(topk_ids.max())
        if lo < 0 or hi >= e:
            raise MoEInputError(f"topk_ids must lie in [0, {e}), found [{lo}, {hi}]")
    if workspace is not None:
        check_workspace(workspace, x.device)
    if scale_max is None:
        scale_max = scale_byte_max(w13_scales, w2_scales)
    wide = scale_max > WIDE_ABOVE
    dev = x.device
    p = t * k
    bt = cfg.block_t
    direct = gluon and cfg.direct  # no align launch to wait for: each of the t k pairs is its own block
    max_blocks = p if direct else min(p, p // bt + min(p, e))
    ids = topk_ids.reshape(-1).to(torch.int32)
    sorted_pairs = torch.empty(max_blocks * bt, dtype=torch.int32, device=dev)  # direct: not read
    num_blocks = torch.empty(1, dtype=torch.int32, device=dev)
    split1 = min(cfg.split1, h // cfg.block_k1)  # at most one K step per split
    split2 = min(cfg.split2, i // cfg.block_k2)
    grid1 = (max_blocks, triton_cdiv(i, cfg.block_n1), split1)
    grid2 = (max_blocks, triton_cdiv(h, cfg.block_n2), split2)
    fuse = frag and cfg.fuse
    # counters, zeroed by align (direct: the caller's workspace, or a fill): w13 tiles (split-K reduce),
    # then w2 column tiles (top-k sum)
    n_cnt1 = grid1[0] * grid1[1] if fuse and split1 > 1 else 0
    n_cnt = n_cnt1 + grid2[1] if fuse else 0
    kept = direct and n_cnt and workspace is not None  # zero already: the kernels leave them so
    if kept:
        counters = _workspace_counters(workspace, n_cnt)
    else:
        counters = torch.empty(max(1, n_cnt), dtype=torch.int32, device=dev)
    if direct:
        block_expert = ids  # block b is pair b: its expert is the routing's
        if n_cnt and not kept:
            counters.zero_()
    else:
        block_expert = torch.empty(max_blocks, dtype=torch.int32, device=dev)
        scratch = torch.empty(_next_pow2(e), dtype=torch.int32, device=dev)
        K._align_kernel[(1,)](
            ids,
            sorted_pairs,
            block_expert,
            num_blocks,
            scratch,
            p,
            max_blocks * bt,
            counters,
            n_cnt,
            BLOCK_T=bt,
            P_PAD=_next_pow2(p),
            E_PAD=_next_pow2(e),
            SLOTS_PAD=_next_pow2(max_blocks * bt),
        )

    act = torch.empty(p, i, dtype=torch.bfloat16, device=dev)
    part = torch.empty(split1, p, 2 * i, dtype=torch.float32, device=dev) if split1 > 1 else act
    blocks = (sorted_pairs, block_expert, num_blocks)
    w13 = w13_packed if decode else w13_packed.view(torch.int32)  # fp32 decoder reads 32-bit words
    # without a trace the kernels take a pointer they never read (TRACE compiles their stores out)
    traces = {
        n: torch.zeros(g[0] * g[1] * g[2], 4, dtype=torch.int64, device=dev) if trace is not None else counters
        for n, g in (("w13", grid1), ("w2", grid2))
    }
    if trace is not None:
        trace.update(traces)
    y = torch.empty(split2, p, h, dtype=torch.float32, device=dev)
    out = torch.empty(t, h, dtype=torch.bfloat16, device=dev)
    wts = topk_weights.to(torch.float32).contiguous()
    if gluon:
        from . import gluon_kernels as GK

        gk = {
            "WIDE": wide,
            "DEPTH": cfg.prefetch,
            "PDL": cfg.pdl,
            "FUSE": fuse,
            "TAPER": cfg.taper,
            "DIRECT": direct,
            "TRACE": trace is not None,
        }
        pdl = {"launch_pdl": True} if cfg.pdl else {}

        def gluon_w13(pair0: int, n_blocks: int) -> None:
            GK._w13_gluon_kernel[(n_blocks, *grid1[1:])](
                x,
                w13_packed.view(torch.int32),
                w13_scales,
                act,
                part,
                *blocks,
                counters,
                traces["w13"],
                p,
                h,
                i,
                k,
                pair0,
                BT=bt,
                NCH=cfg.block_k1 // 128,
                SPLIT=split1,
                NUM_WARPS=cfg.warps1,
                LIMIT=limit,
                **gk,
                num_warps=cfg.warps1,
                **pdl,
            )

        def gluon_w2(pair0: int, n_blocks: int) -> None:
            GK._w2_gluon_kernel[(n_blocks, *grid2[1:])](
                act,
                w2_packed.view(torch.int32),
                w2_scales,
                y,
                *blocks,
                counters[n_cnt1:],
                wts,
                out,
                traces["w2"],
                p,
                h,
                i,
                t,
                pair0,
                BT=bt,
                NCH=cfg.block_k2 // 128,
                SPLIT=split2,
                NUM_WARPS=cfg.warps2,
                TOPK=k,
                **{**gk, "DEPTH": cfg.prefetch2 or cfg.prefetch},
                num_warps=cfg.warps2,
                **pdl,
            )

        def gluon_part(pair0: int, n_blocks: int) -> None:
            gluon_w13(pair0, n_blocks)
            gluon_w2(pair0, n_blocks)

        if cfg.streams > 1 and direct and fuse and trace is None and p > 1:  # no reduce or top-k launch
            _on_streams(gluon_part, p, min(cfg.streams, p), dev)
            return out
        gluon_w13(0, grid1[0])
    elif frag:
        from . import frag_kernels as F

        # the L2 hints and programmatic dependent launch are PTX: GPU decoders only
        gpu = {"PREFETCH": cfg.prefetch if decode else 0, "PDL": cfg.pdl and bool(decode), "FUSE": fuse}
        pdl = {"launch_pdl": True} if gpu["PDL"] else {}
        F._w13_frag_kernel[grid1](
            x,
            w13,
            w13_scales,
            act,
            part,
            *blocks,
            counters,
            p,
            h,
            i,
            k,
            BLOCK_T=bt,
            BLOCK_N=cfg.block_n1,
            BLOCK_K=cfg.block_k1,
            ASM=bool(decode),
            INTERPRET=interpret,
            WIDE=wide,
            SPLIT=split1,
            LIMIT=limit,
            **gpu,
            num_warps=cfg.warps1,
            num_stages=cfg.stages1,
            **pdl,
        )
    else:
        K._w13_silu_kernel[grid1](
            x,
            w13,
            w13_scales,
            act,
            part,
            *blocks,
            p,
            h,
            i,
            k,
            w13.shape[-1],
            h // 32,
            BLOCK_T=bt,
            BLOCK_N=cfg.block_n1,
            BLOCK_K=cfg.block_k1,
            DECODE=decode,
            INTERPRET=interpret,
            WIDE=wide,
            SPLIT=split1,
            LIMIT=limit,
            num_warps=cfg.warps1,
            num_stages=cfg.stages1,
        )
    if split1 > 1 and not fuse:
        block_i = min(1024, _next_pow2(i))
        K._silu_reduce_kernel[(p, triton_cdiv(i, block_i))](part, act, p, i, SPLIT=split1, BLOCK_I=block_i, LIMIT=limit)
    w2 = w2_packed if decode else w2_packed.view(torch.int32)
    if gluon:
        gluon_w2(0, grid2[0])
    elif frag:
        F._w2_frag_kernel[grid2](
            act,
            w2,
            w2_scales,
            y,
            *blocks,
            counters[n_cnt1:],
            wts,
            out,
            p,
            h,
            i,
            t,
            BLOCK_T=bt,
            BLOCK_N=cfg.block_n2,
            BLOCK_K=cfg.block_k2,
            ASM=bool(decode),
            INTERPRET=interpret,
            WIDE=wide,
            SPLIT=split2,
            TOPK=k,
            **gpu,
            num_warps=cfg.warps2,
            num_stages=cfg.stages2,
            **pdl,
        )
    else:
        K._w2_kernel[grid2](
            act,
            w2,
            w2_scales,
            y,
            *blocks,
            p,
            h,
            i,
            w2.shape[-1],
            i // 32,
            BLOCK_T=bt,
            BLOCK_N=cfg.block_n2,
            BLOCK_K=cfg.block_k2,
            DECODE=decode,
            INTERPRET=interpret,
            WIDE=wide,
            SPLIT=split2,
            num_warps=cfg.warps2,
            num_stages=cfg.stages2,
        )
    if not fuse:
        block_h = min(1024, _next_pow2(h))
        K._topk_sum_kernel[(t, triton_cdiv(h, block_h))](y, wts, out, p, h, TOPK=k, BLOCK_H=block_h, SPLIT=split2)
    return out


def moe_workspace(device, size: int = WORKSPACE_COUNTERS):
    """Zeroed int32 counters for `fused_moe_mxfp4(..., workspace=)`: hold one per device and stream."""
    import torch

    return torch.zeros(size, dtype=torch.int32, device=device)


def check_workspace(workspace, device) -> None:
    """A caller's workspace is checked on every call that passes one, used or not (no device sync)."""
    import torch

    if workspace.dtype != torch.int32 or workspace.dim() != 1 or workspace.device != device:
        raise MoEInputError(
            f"workspace must be a 1-D int32 tensor on {device} (make it with moe_workspace(device)), "
            f"got {workspace.dtype} {tuple(workspace.shape)} on {workspace.device}"
        )


def _workspace_counters(workspace, n: int):
    """The first n counters of a checked workspace, after checking it can hold them."""
    if workspace.numel() < n:
        raise MoEInputError(
            f"workspace holds {workspace.numel()} counters, this call needs {n}: "
            f"make it with moe_workspace(device, size={n}) or larger"
        )
    return workspace[:n]


def gluon_unsupported(
    interpret: bool, device_type: str, hip: bool, capability: tuple[int, int], has_gluon: bool, triton_version: str
) -> str | None:
    """Why the Gluon kernels cannot run here, or None (they use mma.sync and NVIDIA layouts)."""
    if interpret:
        return "needs a GPU (the CPU interpreter runs kernel 'triton')"
    reason = nvidia_bf16x2_unsupported(device_type, hip, capability)
    if reason:
        return reason
    if not has_gluon:
        return f"needs Triton with Gluon (3.6 is tested), found Triton {triton_version}"
    return None


# decoders whose inline PTX multiplies in BF16x2 (mul.rn.bf16x2: sm_90 and newer)
BF16X2_DECODERS = ("asm", "asm_split")


def nvidia_bf16x2_unsupported(device_type: str, hip: bool, capability: tuple[int, int]) -> str | None:
    """Why inline NVIDIA PTX that multiplies in BF16x2 cannot run on this device, or None."""
    if device_type != "cuda":
        return f"needs a CUDA GPU, the tensors are on {device_type}"
    if hip:
        return "runs on NVIDIA GPUs only (inline NVIDIA PTX and register layouts), not on ROCm"
    return bf16x2_unsupported(capability)


def bf16x2_unsupported(capability: tuple[int, int]) -> str | None:
    """Why the BF16x2 decoders cannot compile for this compute capability, or None. On sm_80-89
    ptxas rejects mul.bf16x2 ("requires .target sm_90"); fma.rn.bf16x2 with a -0.0 addend would
    give the same bits there, but no such GPU was at hand to check it."""
    if capability < (9, 0):
        return (
            f"needs compute capability 9.0 or newer (its decoder multiplies in BF16x2, PTX mul.bf16x2), "
            f"this GPU has {capability[0]}.{capability[1]}"
        )
    return None


def _check_bf16x2(what: str, device) -> None:
    import torch

    on_nvidia = device.type == "cuda" and not torch.version.hip
    cap = torch.cuda.get_device_capability(device) if on_nvidia else (0, 0)
    reason = nvidia_bf16x2_unsupported(device.type, bool(torch.version.hip), cap)
    if reason:
        raise MoEInputError(f"{what} {reason}: use decoder 'fp32' with kernel 'triton'")


def _gluon_facts(device, interpret: bool) -> tuple:
    import torch
    import triton

    try:
        import triton.experimental.gluon  # noqa: F401

        has_gluon = True
    except ImportError:
        has_gluon = False
    on_cuda = device.type == "cuda" and not interpret
    cap = torch.cuda.get_device_capability(device) if on_cuda else (0, 0)
    return interpret, device.type, bool(torch.version.hip), cap, has_gluon, triton.__version__


def _check_layout(layout: str, decode: int) -> bool:
    from .prepare import LAYOUTS

    if layout not in LAYOUTS:
        raise MoEInputError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if layout == "frag" and DECODERS[decode] not in ("fp32", "asm"):
        raise MoEInputError(f"layout 'frag' works with decoders fp32 and asm, not {DECODERS[decode]!r}")
    return layout == "frag"


def _check_frag_blocks(cfg: LaunchConfig, h: int, i: int) -> None:
    from .frag_layout import CHUNK_K

    if h % CHUNK_K or i % CHUNK_K:
        raise MoEInputError(f"layout 'frag' needs H={h} and I={i} to be multiples of {CHUNK_K}")
    if cfg.block_k1 % CHUNK_K or cfg.block_k2 % CHUNK_K:
        raise MoEInputError(
            f"layout 'frag' needs block_k1={cfg.block_k1} and block_k2={cfg.block_k2} to be multiples of {CHUNK_K}"
        )
    if i % cfg.block_n1 or h % cfg.block_n2:
        raise MoEInputError(
            f"layout 'frag' needs block_n1={cfg.block_n1} to divide I={i} and block_n2={cfg.block_n2} to divide H={h}"
        )


def scale_byte_max(*scales) -> int:
    """Largest E8M0 byte over the given scale tensors (one reduction and one sync)."""
    return max(int(s.max()) for s in scales)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def dequantize_mxfp4(
    packed, scales, out_dtype=None, wide: bool | None = None, decoder: str = "fp32", layout: str = "converter"
):
    """Decode a [R, K/2] MXFP4 matrix with the kernels' in-register decoder (for exactness tests)."""
    import torch

    from . import triton_kernels as K

    out_dtype = out_dtype or torch.float32
    if packed.dim() != 2 or packed.dtype != torch.uint8 or scales.dtype != torch.uint8:
        raise MoEInputError("dequantize_mxfp4 takes uint8 packed [R, K/2] and uint8 scales [R, K/32]")
    r, k2 = packed.shape
    k = 2 * k2
    if k % 32 or tuple(scales.shape) != (r, k // 32):
        raise MoEInputError(f"packed {tuple(packed.shape)} and scales {tuple(scales.shape)} do not match")
    if wide is None:
        wide = scale_byte_max(scales) > WIDE_ABOVE
    out = torch.empty(r, k, dtype=torch.float32 if decoder == "gluon" else out_dtype, device=packed.device)
    if decoder not in ("fp32", "asm", "gluon"):
        raise MoEInputError(
            f"dequantize_mxfp4: decoder must be 'fp32', 'asm' or 'gluon' (frag layout, GPU), got {decoder!r}"
        )
    if decoder == "gluon":
        if layout != "frag":
            raise MoEInputError("decoder 'gluon' reads the frag layout only")
        reason = gluon_unsupported(*_gluon_facts(packed.device, _interpret()))
        if reason:
            raise MoEInputError(f"decoder 'gluon' {reason}")
        from . import gluon_kernels as GK
        from .frag_layout import check_shape

        try:
            check_shape(packed, scales)
        except ValueError as exc:
            raise MoEInputError(str(exc)) from None
        warps = 4 if r % 64 == 0 else 1
        GK._dequant_gluon_kernel[(r // (16 * warps), k // 128)](
            packed.contiguous().view(torch.int32),
            scales.contiguous(),
            out,
            k,
            NCH=1,
            WIDE=wide,
            NUM_WARPS=warps,
            num_warps=warps,
        )
        return out.to(out_dtype)
    decode = DECODERS.index(decoder)
    if decoder in BF16X2_DECODERS:
        _check_bf16x2(f"decoder {decoder!r}", packed.device)
    w = packed.contiguous() if decode else packed.contiguous().view(torch.int32)
    if _check_layout(layout, decode):
        from . import frag_kernels as F
        from .frag_layout import check_shape

        try:
            check_shape(packed, scales)
        except ValueError as exc:
            raise MoEInputError(str(exc)) from None
        block_r = 64 if r % 64 == 0 else 16
        F._dequant_frag_kernel[(r // block_r, k // 128)](
            w,
            scales.contiguous(),
            out,
            r,
            k,
            BLOCK_R=block_r,
            BLOCK_K=128,
            OUT_BF16=out_dtype == torch.bfloat16,
            WIDE=wide,
            ASM=bool(decode),
        )
        return out
    block_k = 64 if k % 64 == 0 else 32
    block_r = 16
    K._dequant_kernel[(triton_cdiv(r, block_r), k // block_k)](
        w,
        scales.contiguous(),
        out,
        r,
        k,
        BLOCK_R=block_r,
        BLOCK_K=block_k,
        OUT_BF16=out_dtype == torch.bfloat16,
        WIDE=wide,
        DECODE=decode,
    )
    return out
