"""GGUF writer: encode metadata and tensor infos, then stream tensor bytes from source files.

Existing KV entries are copied as their raw bytes (exact, whatever they hold); new or
changed ones are encoded here. Tensor data is copied file-to-file in the kernel
(`cookbook.files.copy_range`), so a multi-GB write never passes through Python.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cookbook.files import copy_range
from cookbook.gguf.errors import GGUFError
from cookbook.gguf.format import (
    INTEGER_RANGE,
    MAGIC,
    SCALAR_FORMAT,
    SCALAR_NUMPY,
    SCALAR_SIZE,
    GGMLType,
    ValueType,
    pad,
)
from cookbook.gguf.reader import GGUFArray, GGUFFile


def encode_string(s: str | bytes) -> bytes:
    b = s if isinstance(s, bytes) else s.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(b)) + b


def encode_scalar(vtype: ValueType, value) -> bytes:
    if vtype in INTEGER_RANGE:
        lo, hi = INTEGER_RANGE[vtype]
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise GGUFError(f"{value!r} is not a {vtype.name} (range {lo}..{hi})")
    if vtype == ValueType.BOOL:
        if not isinstance(value, bool):
            raise GGUFError(f"{value!r} is not a bool")
        value = int(value)
    return struct.pack(SCALAR_FORMAT[vtype], value)


def encode_value(vtype: ValueType, value) -> bytes:
    if vtype == ValueType.STRING:
        return encode_string(value)
    if vtype == ValueType.ARRAY:
        if not isinstance(value, GGUFArray) or value.items is None:
            raise GGUFError("array value must be a decoded GGUFArray")
        head = struct.pack("<IQ", value.elem_type, value.count)
        if value.elem_type in SCALAR_SIZE:
            import numpy as np

            return head + np.asarray(value.items).astype(SCALAR_NUMPY[value.elem_type]).tobytes()
        return head + b"".join(encode_value(value.elem_type, x) for x in value.items)
    return encode_scalar(vtype, value)


def encode_kv(key: str, vtype: ValueType, value) -> bytes:
    return encode_string(key) + struct.pack("<I", vtype) + encode_value(vtype, value)


def raw_kvs(src: GGUFFile, keys: Iterable[str]) -> list[bytes]:
    """Exact bytes of several KV entries of `src`, read in one pass over its metadata."""
    with open(src.path, "rb") as fh:
        fh.seek(src.kv_start)
        blob = fh.read(src.infos_start - src.kv_start)
    out = []
    for k in keys:
        f = src.fields[k]
        out.append(blob[f.key_offset - src.kv_start : f.end - src.kv_start])
    return out


@dataclass
class TensorSpec:
    """One tensor to write: its info, and where its bytes come from."""

    name: str
    dims: tuple[int, ...]  # ne order (innermost first)
    type: GGMLType
    nbytes: int
    src_path: Path | None = None  # read nbytes from here at src_offset ...
    src_offset: int = 0
    data: bytes | None = None  # ... or write these bytes


def encode_header(
    kvs: Sequence[bytes], tensors: Sequence[TensorSpec], alignment: int, version: int = 3
) -> tuple[bytes, list[int]]:
    """Header bytes padded to the data section, and each tensor's relative offset."""
    parts = [MAGIC, struct.pack("<IQQ", version, len(tensors), len(kvs)), *kvs]
    offsets, off = [], 0
    for t in tensors:
        offsets.append(off)
        parts.append(
            encode_string(t.name)
            + struct.pack("<I", len(t.dims))
            + struct.pack(f"<{len(t.dims)}Q", *t.dims)
            + struct.pack("<IQ", t.type, off)
        )
        off += pad(t.nbytes, alignment)
    header = b"".join(parts)
    return header + b"\0" * (pad(len(header), alignment) - len(header)), offsets


def write_gguf(
    out_path, kvs: Sequence[bytes], tensors: Sequence[TensorSpec], alignment: int, *, version: int = 3, progress=None
) -> None:
    """Write a complete GGUF to out_path (the caller makes it atomic). Tensor padding is zeros."""
    header, _ = encode_header(kvs, tensors, alignment, version)
    fds: dict[Path, int] = {}
    try:
        with open(out_path, "wb") as out:
            out.write(header)
            out.flush()
            dst = out.fileno()
            for i, run, span in _runs(tensors, alignment):
                t = tensors[i]
                if t.data is not None:
                    if len(t.data) != t.nbytes:
                        raise GGUFError(f"tensor {t.name!r}: {len(t.data)} bytes given, {t.nbytes} expected")
                    os.write(dst, t.data)
                else:
                    src = fds.get(t.src_path)
                    if src is None:
                        src = fds[t.src_path] = os.open(t.src_path, os.O_RDONLY)
                    copy_range(src, t.src_offset, dst, span, progress)
                last = tensors[i + run - 1]
                if i + run < len(tensors):
                    gap = pad(last.nbytes, alignment) - last.nbytes
                    if gap:
                        os.write(dst, b"\0" * gap)
    finally:
        for fd in fds.values():
            os.close(fd)


def _runs(tensors: Sequence[TensorSpec], alignment: int):
    """(first index, count, bytes) of runs of tensors laid out in their source exactly as in the
    output (same file, each next one at the previous end padded to `alignment`), so a run is one
    copy, padding included. Consecutive tensors of one shard or one file form a single run."""
    i = 0
    while i < len(tensors):
        t = tensors[i]
        j, end = i + 1, t.src_offset + t.nbytes
        if t.data is None:
            while j < len(tensors):
                prev, nxt = tensors[j - 1], tensors[j]
                if (
                    nxt.data is not None
                    or nxt.src_path != t.src_path
                    or nxt.src_offset != prev.src_offset + pad(prev.nbytes, alignment)
                ):
                    break
                end = nxt.src_offset + nxt.nbytes
                j += 1
        yield i, j - i, end - t.src_offset
        i = j


def tensor_specs(src: GGUFFile) -> list[TensorSpec]:
    """TensorSpecs that copy every tensor of `src` from its file."""
    return [TensorSpec(t.name, t.dims, t.type, t.nbytes, src.path, src.tensor_offset(t)) for t in src.tensors]
