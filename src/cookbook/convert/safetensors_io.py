"""Streaming safetensors: a bounded header reader and a writer that never holds a whole tensor set.

Format (huggingface/safetensors): u64 LE header length N, N bytes of JSON
{"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [b, e]}}, then the data;
offsets are relative to the data start, contiguous from 0, C order, little-endian. The
writer computes the header from names, dtypes and shapes first, then streams the bytes
in offset order (NeMo Automodel's approach), padding the JSON with spaces to 8 bytes.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from cookbook.errors import CookbookError
from cookbook.untrusted import NotRegularFile, open_regular, printable

MAX_HEADER = 100_000_000  # the reference reader's limit
DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
    "F4": 4,
}


class SafetensorsError(CookbookError, ValueError):
    def __init__(self, path, reason: str, help: str | None = None):
        super().__init__(printable(f"{path}: {reason}"), help=printable(help) if help else None)


@dataclass
class STensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute file offset of the first byte
    nbytes: int


def nbytes_of(dtype: str, shape) -> int:
    n = 1
    for d in shape:
        n *= d
    bits = n * DTYPE_BITS[dtype]
    return (bits + 7) // 8


FIX = "the file is corrupt or not safetensors: re-download it"


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _parse_header(path: Path, raw: bytes) -> dict:
    """The header's JSON object; every way it can be malformed is one SafetensorsError."""
    try:
        header = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as e:
        raise SafetensorsError(path, f"header is not UTF-8 (byte {8 + e.start})", help=FIX) from None
    except RecursionError:
        raise SafetensorsError(path, "header JSON is nested too deeply", help=FIX) from None
    except ValueError as e:
        raise SafetensorsError(path, f"header is not valid JSON ({_short(str(e))[1:-1]})", help=FIX) from None
    if not isinstance(header, dict):
        raise SafetensorsError(path, f"header is a JSON {type(header).__name__}, not an object", help=FIX)
    return header


def read_header(path) -> tuple[dict[str, STensor], dict[str, str]]:
    """Validated tensor table of a safetensors file (no data read)."""
    path = Path(path)
    try:
        fd = open_regular(path)
    except NotRegularFile as e:
        raise SafetensorsError(path, e.strerror, help="give the safetensors file itself") from None
    size = os.fstat(fd).st_size
    with open(fd, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise SafetensorsError(path, f"file has {size} bytes, smaller than the 8-byte header length", help=FIX)
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER or 8 + n > size:
            raise SafetensorsError(
                path,
                f"header length {n} is larger than {MAX_HEADER} or the file ({size} bytes)",
                help="the file is truncated or not safetensors",
            )
        raw = f.read(n)
    header = _parse_header(path, raw)
    meta = header.pop("__metadata__", None)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise SafetensorsError(path, f"__metadata__ must be an object of strings, found {_short(meta)}", help=FIX)
    tensors: dict[str, STensor] = {}
    spans = []
    for name, info in header.items():
        where = f"header: tensor {name!r}"
        if not isinstance(info, dict):
            raise SafetensorsError(
                path, f"{where}: entry is {_short(info)}, not an object with dtype, shape, data_offsets", help=FIX
            )
        dtype, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
            raise SafetensorsError(
                path, f"{where}: dtype {_short(dtype)} is not one of {', '.join(DTYPE_BITS)}", help=FIX
            )
        if not isinstance(shape, list) or len(shape) > 64 or not all(_is_int(d) and 0 <= d < 2**63 for d in shape):
            raise SafetensorsError(
                path, f"{where}: shape {_short(shape)} is not a list of whole numbers 0 <= d < 2**63", help=FIX
            )
        if (
            not isinstance(offs, list)
            or len(offs) != 2
            or not all(_is_int(x) and 0 <= x < 2**63 for x in offs)
            or offs[0] > offs[1]
        ):
            raise SafetensorsError(
                path, f"{where}: data_offsets {_short(offs)} is not [begin, end] with 0 <= begin <= end", help=FIX
            )
        shape, (b, e) = tuple(shape), offs
        if e - b != nbytes_of(dtype, shape):
            raise SafetensorsError(
                path, f"{where}: {e - b} bytes for {dtype} {list(shape)} (needs {nbytes_of(dtype, shape)})", help=FIX
            )
        tensors[name] = STensor(name, dtype, shape, 8 + n + b, e - b)
        spans.append((b, e, name))
    spans.sort()
    pos = 0
    for b, e, name in spans:
        if b != pos:
            raise SafetensorsError(
                path, f"tensor {name!r} starts at {b}, expected {pos} (data must be contiguous)", help=FIX
            )
        pos = e
    if 8 + n + pos != size:
        raise SafetensorsError(
            path,
            f"data ends at {8 + n + pos} but the file has {size} bytes",
            help="the file is truncated or has trailing bytes",
        )
    return tensors, meta


def read_bytes(path, t: STensor) -> bytes:
    with open(path, "rb", buffering=0) as f:
        f.seek(t.start)
        data = f.read(t.nbytes)
    if len(data) != t.nbytes:
        raise SafetensorsError(path, f"tensor {t.name!r}: short read")
    return data


class Writer:
    """Write one safetensors file whose tensors (name, dtype, shape) are known up front.

    Call `write(name, bytes)` in the declared order, possibly several times per tensor
    (chunks); `close()` checks every tensor got exactly its bytes.
    """

    def __init__(self, path, specs: list[tuple[str, str, tuple[int, ...]]], metadata: dict | None = None):
        header: dict = {}
        if metadata:
            header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
        off = 0
        self.order = []
        for name, dtype, shape in specs:
            nb = nbytes_of(dtype, shape)
            header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + nb]}
            self.order.append((name, nb))
            off += nb
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        self.total = off
        self.f = open(path, "wb", buffering=0)  # unbuffered: callers may also copy into f.fileno()
        self._write_all(struct.pack("<Q", len(raw)) + raw)
        self.i, self.left = 0, self.order[0][1] if self.order else 0

    def _write_all(self, mv) -> None:
        mv = memoryview(mv).cast("B")
        while len(mv):
            n = self.f.write(mv)
            mv = mv[n:]

    def write(self, name: str, data) -> None:
        mv = memoryview(data).cast("B")
        self.reserve(name, len(mv))
        self._write_all(mv)

    def reserve(self, name: str, n: int) -> None:
        """Account for n bytes of `name` that the caller writes at f.fileno()'s position itself."""
        while self.i < len(self.order) and self.left == 0:  # zero-size tensors
            self.i += 1
            self.left = self.order[self.i][1] if self.i < len(self.order) else 0
        if self.i >= len(self.order) or self.order[self.i][0] != name:
            expect = self.order[self.i][0] if self.i < len(self.order) else "nothing"
            raise ValueError(f"safetensors writer: got {name!r}, expected {expect}")
        if n > self.left:
            raise ValueError(f"safetensors writer: {name!r} gets {n} bytes, only {self.left} left")
        self.left -= n
        if self.left == 0:
            self.i += 1
            self.left = self.order[self.i][1] if self.i < len(self.order) else 0

    def close(self) -> None:
        while self.i < len(self.order) and self.left == 0:
            self.i += 1
            self.left = self.order[self.i][1] if self.i < len(self.order) else 0
        self.f.close()
        if self.i < len(self.order):
            raise ValueError(f"safetensors writer: {self.order[self.i][0]!r} is missing {self.left} bytes")


def shard_names(n: int) -> list[str]:
    if n == 1:
        return ["model.safetensors"]
    return [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]


def plan_shards(specs: list[tuple[str, str, tuple[int, ...]]], max_bytes: int) -> list[list]:
    """Group tensors in order into shards of at most max_bytes (a larger tensor gets its own)."""
    shards: list[list] = [[]]
    size = 0
    for s in specs:
        nb = nbytes_of(s[1], s[2])
        if shards[-1] and size + nb > max_bytes:
            shards.append([])
            size = 0
        shards[-1].append(s)
        size += nb
    return shards


def write_index(out_dir, shards: list[list], metadata: dict | None = None) -> Path | None:
    """model.safetensors.index.json for a sharded checkpoint (none for a single file)."""
    names = shard_names(len(shards))
    if len(shards) == 1:
        return None
    total = sum(nbytes_of(s[1], s[2]) for grp in shards for s in grp)
    index = {
        "metadata": {"total_size": total, **(metadata or {})},
        "weight_map": {s[0]: names[i] for i, grp in enumerate(shards) for s in grp},
    }
    p = Path(out_dir) / "model.safetensors.index.json"
    p.write_text(json.dumps(index, indent=2) + "\n")
    return p
