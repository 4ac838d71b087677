"""Compile the frag expert kernels (Triton and Gluon) for Hopper (sm_90) without a GPU and read
their inner loop.

Triton compiles ahead of time for any target with the ptxas it ships, and its package also
ships cuobjdump. That makes the machine code of the hot loop checkable on a CPU-only
machine (CI): how many instructions each weight costs, and whether the weight tile is
shuffled through shared memory (ldmatrix rounds between barriers), which is what a wrong
register layout costs and what cut the kernel's bandwidth by a third before it was found.
"""

from __future__ import annotations

import collections
import inspect
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass


@dataclass
class LoopReport:
    kernel: str
    instructions: int  # in the innermost loop (one K step)
    weights_per_thread: int  # weights one thread decodes per K step
    opcodes: collections.Counter
    registers: int | None

    @property
    def per_weight(self) -> float:
        return self.instructions / self.weights_per_thread


def _signature(kernel: str) -> dict[str, str]:
    """The runtime arguments of the w13 / w2 kernels (both families take the same ones)."""
    blocks = {"sorted_pairs_ptr": "*i32", "block_expert_ptr": "*i32", "num_blocks_ptr": "*i32", "cnt_ptr": "*i32"}
    if kernel == "w13":
        head = {"x_ptr": "*bf16", "w_ptr": "*u8", "s_ptr": "*u8", "act_ptr": "*bf16", "part_ptr": "*fp32"}
        return {**head, **blocks, "P": "i32", "H": "i32", "I": "i32", "TOPK": "i32"}
    head = {"act_ptr": "*bf16", "w_ptr": "*u8", "s_ptr": "*u8", "y_ptr": "*fp32"}
    return {**head, **blocks, "wts_ptr": "*fp32", "out_ptr": "*bf16", "P": "i32", "H": "i32", "I": "i32", "T": "i32"}


def _gluon_signature(kernel: str) -> dict[str, str]:
    """`_signature` with the Gluon kernels' extras: int32 words, the timeline buffer (after the counters
    in w13, after out in w2) and the launch's first block (last)."""
    sig = {**_signature(kernel), "w_ptr": "*i32", "PAIR0": "i32"}
    after = "cnt_ptr" if kernel == "w13" else "out_ptr"
    order = list(sig)
    order.insert(order.index(after) + 1, "trace_ptr")
    return {n: sig.get(n, "*i64") for n in order}


def _compile(source, fn, sig: dict[str, str], consts: dict, warps: int, arch: int):
    """Compile fn (its runtime arguments sig, constexprs consts) for sm_<arch> as a real launch is
    specialized: pointers and H, I divisible by 16."""
    import triton
    from triton.backends.compiler import GPUTarget

    names = set(inspect.signature(fn.fn).parameters)
    if not set(sig) | set(consts) <= names:
        raise RuntimeError(f"sass.py: {fn.fn.__name__}'s parameters changed ({sorted(names)}); update _signature")
    sig = {**sig, **{c: "constexpr" for c in consts}}
    order = list(sig)
    attrs = {
        (order.index(n),): [["tt.divisibility", 16]] for n, t in sig.items() if t.startswith("*") or n in ("H", "I")
    }
    return triton.compile(
        source(fn, sig, consts, attrs),
        target=GPUTarget("cuda", arch, 32),
        options={"num_warps": warps, "num_stages": 1},
    )


def _tool(name: str) -> str:
    import triton

    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)


def compile_frag_kernel(
    kernel: str, block_n: int = 64, block_k: int = 128, warps: int = 4, prefetch: int = 1, wide: bool = False
):
    """The compiled `_w13_frag_kernel` or `_w2_frag_kernel` (kernel "w13" or "w2") for sm_90,
    specialized as a real launch is (pointers and H, I divisible by 16)."""
    from triton.compiler import ASTSource

    from cookbook.kernels.mxfp4_moe import frag_kernels as F

    fn = F._w13_frag_kernel if kernel == "w13" else F._w2_frag_kernel
    consts = {
        "BLOCK_T": 16,
        "BLOCK_N": block_n,
        "BLOCK_K": block_k,
        "ASM": True,
        "INTERPRET": False,
        "WIDE": wide,
        "SPLIT": 1,
        "PREFETCH": prefetch,
        "PDL": False,
        "FUSE": False,
    }
    if kernel == "w2":
        consts["TOPK"] = 8
    else:
        consts["LIMIT"] = 0.0  # no swiglu clamp: the plain epilogue the tables were measured with
    return _compile(ASTSource, fn, _signature(kernel), consts, warps, 90)


def instructions(sass: str) -> list[tuple[int, str]]:
    """(address, instruction) of each line of `cuobjdump -sass` output, predicate included."""
    return [
        (int(m.group(1), 16), m.group(2))
        for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+((?:@!?U?P\w+\s+)?[A-Z][^;]*);", sass)
    ]


def opcode(instruction: str) -> str:
    """The opcode of an instruction, without its predicate and modifiers: "@P0 HMMA.16816.F32 ..." -> "HMMA"."""
    return re.sub(r"^@!?U?P\w+\s+", "", instruction).split()[0].split(".")[0]


def inner_loop(cubin: bytes) -> tuple[collections.Counter, int | None]:
    """Opcode counts of the innermost loop (the last backward branch's range) and the register count."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([_tool("cuobjdump"), "-sass", f.name], capture_output=True, text=True, check=True).stdout
        res = subprocess.run([_tool("cuobjdump"), "-res-usage", f.name], capture_output=True, text=True).stdout
    lines = instructions(sass)
    best = None
    for addr, ins in lines:
        m = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", ins)
        if m and m.group(1) and int(m.group(1), 16) < addr:
            lo = int(m.group(1), 16)
            if best is None or addr - lo > best[1] - best[0]:
                best = (lo, addr)
    if best is None:
        raise RuntimeError("no loop found in the kernel's SASS")
    ops = collections.Counter(opcode(i) for a, i in lines if best[0] <= a <= best[1])
    m = re.search(r"REG:(\d+)", res)
    return ops, int(m.group(1)) if m else None


def compile_gluon_kernel(
    kernel: str,
    warps: int = 4,
    block_t: int = 8,
    block_k: int = 128,
    depth: int = 1,
    wide: bool = False,
    arch: int = 90,
    **options,
):
    """The compiled `_w13_gluon_kernel` or `_w2_gluon_kernel` for sm_<arch> (block_n = 16 * warps);
    options: more of its constexprs (TAPER, DIRECT, ...)."""
    from triton.experimental.gluon._runtime import GluonASTSource

    from cookbook.kernels.mxfp4_moe import gluon_kernels as G

    fn = G._w13_gluon_kernel if kernel == "w13" else G._w2_gluon_kernel
    consts = {
        "BT": block_t,
        "NCH": block_k // 128,
        "WIDE": wide,
        "SPLIT": 1,
        "NUM_WARPS": warps,
        "DEPTH": depth,
        "PDL": False,
        "FUSE": False,
        "TAPER": False,
        "DIRECT": False,
        "TRACE": False,
    }  # no defaults in a source compile
    if kernel == "w2":
        consts["TOPK"] = 8
    else:
        consts["LIMIT"] = 0.0
    return _compile(GluonASTSource, fn, _gluon_signature(kernel), {**consts, **options}, warps, arch)


def loop_report(
    kernel: str,
    block_n: int = 64,
    block_k: int = 128,
    warps: int = 4,
    prefetch: int = 1,
    engine: str = "triton",
    block_t: int = 8,
) -> LoopReport:
    """The inner loop of one frag kernel. engine "gluon": block_n must be 16 * warps; prefetch is
    its register depth; block_t its token block (8 or 16)."""
    if engine == "gluon":
        k = compile_gluon_kernel(kernel, warps, block_t, block_k, prefetch)
    else:
        k = compile_frag_kernel(kernel, block_n, block_k, warps, prefetch)
    ops, regs = inner_loop(k.asm["cubin"])
    tiles = 2 if kernel == "w13" else 1
    return LoopReport(kernel, sum(ops.values()), tiles * block_n * block_k // (32 * warps), ops, regs)
