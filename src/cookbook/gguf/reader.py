"""Bounded, validating GGUF reader.

GGUF files come from strangers, so every count and length is checked against a limit and
against the bytes left in the file before anything is read or allocated, and any problem
ends in one `GGUFError` naming the field and its byte offset. Checks follow llama.cpp's
`gguf_init_from_reader` (duplicate keys/names, alignment, n_dims, types, block sizes,
dense in-order tensor data) plus limits of our own (see `Limits`).
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cookbook.gguf.errors import GGUFError
from cookbook.gguf.format import (
    ALIGNMENT_KEY,
    BLOCK_LAYOUT,
    DEFAULT_ALIGNMENT,
    MAGIC,
    MAX_DIMS,
    MAX_NAME_BYTES,
    SCALAR_FORMAT,
    SCALAR_NUMPY,
    SCALAR_SIZE,
    SUPPORTED_VERSIONS,
    GGMLType,
    ValueType,
    pad,
)
from cookbook.untrusted import NotRegularFile, open_regular

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Upper bounds for an untrusted file (each also bounded by the bytes left in the file)."""

    max_tensors: int = 1_000_000
    max_kv: int = 100_000
    max_key_bytes: int = 4096
    max_string_bytes: int = 64 * MiB  # one string value; chat templates are ~10 KB
    max_array_elems: int = 16_000_000  # vocabularies are ~10**5..10**6
    max_array_depth: int = 2
    max_header_bytes: int = 1024 * MiB  # metadata + tensor infos together
    max_alignment: int = 1 << 24
    # Budgets for the whole header (each item above may be within its limit while the sum is not:
    # a 192 MB file of nested empty arrays once took 5.4 GB and 68 s to decode).
    max_total_array_elems: int = 16_000_000  # elements of all arrays together (Gemma 3: 0.8M; worst case ~9 s, 0.6 GB)
    max_nested_arrays: int = 65_536  # arrays inside arrays, all together (each one a Python object)


@dataclass
class GGUFArray:
    elem_type: ValueType
    count: int
    # numpy array (numbers, bools as uint8), list[str], list[GGUFArray]; None when not decoded
    items: Any = None


@dataclass
class Field:
    key: str
    type: ValueType
    value: Any  # int/float/bool/str, or GGUFArray
    key_offset: int  # first byte of the KV entry (its key length)
    value_offset: int  # first byte of the value (after the u32 type)
    end: int  # one past the last byte of the entry

    def contents(self):
        """Plain Python value: arrays as lists (None if not decoded)."""
        v = self.value
        if isinstance(v, GGUFArray):
            return _array_to_list(v)
        return v


def _array_to_list(a: GGUFArray):
    if a.items is None:
        return None
    if a.elem_type == ValueType.ARRAY:
        return [_array_to_list(x) for x in a.items]
    if a.elem_type == ValueType.STRING:
        return list(a.items)
    if a.elem_type == ValueType.BOOL:
        return [bool(x) for x in a.items]
    return a.items.tolist()


@dataclass
class TensorInfo:
    name: str
    dims: tuple[int, ...]  # ne[0] (innermost) first, as stored
    type: GGMLType
    offset: int  # relative to the data section
    nbytes: int
    info_offset: int  # where this tensor info starts in the file

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def shape(self) -> tuple[int, ...]:
        """numpy / PyTorch order (outermost first)."""
        return tuple(reversed(self.dims))


@dataclass
class GGUFFile:
    path: Path
    version: int
    fields: dict[str, Field]
    tensors: list[TensorInfo]
    alignment: int
    kv_start: int  # first byte after the 24-byte header (the first KV entry)
    infos_start: int  # first tensor info
    header_end: int  # one past the last tensor info
    data_offset: int  # start of the tensor data section (header_end padded to alignment)
    file_size: int
    data_end: int = 0  # one past the last tensor's bytes (absolute)
    extra: dict = field(default_factory=dict)

    def get(self, key: str, default=None):
        f = self.fields.get(key)
        return default if f is None else f.contents()

    def tensor_offset(self, t: TensorInfo) -> int:
        return self.data_offset + t.offset


class _Cursor:
    """Reads little-endian values from a mapped file, checking every length first."""

    def __init__(self, buf, size: int, path: Path, limits: Limits):
        self.buf, self.size, self.path, self.limits = buf, size, path, limits
        self.pos = 0
        self.array_elems = 0  # budget use so far (Limits.max_total_array_elems / max_nested_arrays)
        self.nested = 0

    def spend(self, count: int, nested: bool, what: str, offset: int) -> None:
        self.array_elems += count
        if self.array_elems > self.limits.max_total_array_elems:
            self.fail(
                f"arrays hold more than {self.limits.max_total_array_elems:,} elements in all "
                f"(Limits.max_total_array_elems; {self.array_elems:,} so far)",
                field=what,
                offset=offset,
                help="real vocabularies need far fewer; raise the limit only for a file you trust",
            )
        if nested:
            self.nested += count
            if self.nested > self.limits.max_nested_arrays:
                self.fail(
                    f"more than {self.limits.max_nested_arrays:,} arrays nested in arrays in all "
                    f"(Limits.max_nested_arrays; {self.nested:,} so far)",
                    field=what,
                    offset=offset,
                    help="raise the limit only for a file you trust",
                )

    def fail(self, reason: str, *, field: str | None = None, offset: int | None = None, help=None):
        raise GGUFError(reason, path=self.path, offset=self.pos if offset is None else offset, field=field, help=help)

    def need(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            self.fail(
                f"needs {n} bytes but only {self.size - self.pos} are left in the file ({self.size} bytes)",
                field=what,
                help="the file is truncated or corrupt; re-download it, or join all of its parts",
            )
        if self.pos + n > self.limits.max_header_bytes:
            self.fail(
                f"header would exceed {self.limits.max_header_bytes} bytes",
                field=what,
                help="raise Limits.max_header_bytes only for a file you trust",
            )

    def scalar(self, vtype: ValueType, what: str):
        n = SCALAR_SIZE[vtype]
        self.need(n, what)
        (v,) = struct.unpack_from(SCALAR_FORMAT[vtype], self.buf, self.pos)
        if vtype == ValueType.BOOL:
            if v > 1:
                self.fail(f"bool must be 0 or 1, found {v}", field=what)
            v = bool(v)
        self.pos += n
        return v

    def u32(self, what: str) -> int:
        return self.scalar(ValueType.UINT32, what)

    def u64(self, what: str) -> int:
        return self.scalar(ValueType.UINT64, what)

    def string_bytes(self, what: str, limit: int) -> bytes:
        start = self.pos
        n = self.u64(what + " (length)")
        if n > limit:
            self.fail(f"string length {n} exceeds the limit of {limit} bytes", field=what, offset=start)
        self.need(n, what)
        b = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return b


_U64 = struct.Struct("<Q").unpack_from


def _skip_strings(cur: _Cursor, count: int, what: str) -> None:
    # Tight loop (a 262k-token vocabulary in ~30 ms); bounds are checked per element.
    buf, pos, end, limit = cur.buf, cur.pos, min(cur.size, cur.limits.max_header_bytes), cur.limits.max_string_bytes
    for i in range(count):
        if pos + 8 > end:
            break
        n = _U64(buf, pos)[0]
        if n > limit:
            cur.pos = pos
            cur.fail(f"string length {n} exceeds the limit of {limit} bytes", field=f"{what}[{i}]")
        pos += 8 + n
    else:
        if pos <= end:
            cur.pos = pos
            return
    cur.pos = min(pos, end)
    cur.need(8 if pos + 8 > end else pos - end, what)  # raises with the truncation message


def _value_type(cur: _Cursor, raw: int, what: str, offset: int) -> ValueType:
    try:
        return ValueType(raw)
    except ValueError:
        cur.fail(f"unknown value type {raw} (known: 0..12)", field=what, offset=offset)


def _read_value(cur: _Cursor, vtype: ValueType, what: str, depth: int, decode: bool):
    lim = cur.limits
    if vtype == ValueType.STRING:
        return cur.string_bytes(what, lim.max_string_bytes).decode("utf-8", "surrogateescape")
    if vtype != ValueType.ARRAY:
        return cur.scalar(vtype, what)
    start = cur.pos
    if depth >= lim.max_array_depth:
        cur.fail(f"arrays nested deeper than {lim.max_array_depth}", field=what)
    etype = _value_type(cur, cur.u32(what + " (array type)"), what + " (array type)", start)
    count_at = cur.pos
    count = cur.u64(what + " (array count)")
    if count > lim.max_array_elems:
        cur.fail(f"array count {count} exceeds the limit of {lim.max_array_elems}", field=what, offset=count_at)
    cur.spend(count, etype == ValueType.ARRAY, what, count_at)
    if etype in SCALAR_SIZE:
        nbytes = count * SCALAR_SIZE[etype]
        cur.need(nbytes, what)
        items = None
        if decode:
            import numpy as np

            items = np.frombuffer(cur.buf, dtype=SCALAR_NUMPY[etype], count=count, offset=cur.pos).copy()
            if etype == ValueType.BOOL and count and int(items.max()) > 1:
                bad = int((items > 1).argmax())
                cur.fail(
                    f"bool array element {bad} is {int(items[bad])}, must be 0 or 1", field=what, offset=cur.pos + bad
                )
        elif etype == ValueType.BOOL and count:
            raw = bytes(cur.buf[cur.pos : cur.pos + count])
            if raw.translate(None, b"\0\1"):  # the same check without numpy, so no mode accepts what inspect refuses
                bad = next(i for i, b in enumerate(raw) if b > 1)
                cur.fail(f"bool array element {bad} is {raw[bad]}, must be 0 or 1", field=what, offset=cur.pos + bad)
        cur.pos += nbytes
        return GGUFArray(etype, count, items)
    # strings and nested arrays: each element at least 8 bytes, so the count is bounded by the file
    cur.need(count * 8, what)
    if etype == ValueType.STRING:
        if not decode:
            _skip_strings(cur, count, what)
            return GGUFArray(etype, count, None)
        items = [cur.string_bytes(what, lim.max_string_bytes).decode("utf-8", "surrogateescape") for _ in range(count)]
        return GGUFArray(etype, count, items)
    items = [_read_value(cur, ValueType.ARRAY, f"{what}[{i}]", depth + 1, decode) for i in range(count)]
    return GGUFArray(etype, count, items)


def read_gguf(
    path,
    *,
    limits: Limits | None = None,
    decode_arrays: bool = True,
    check_data: bool = True,
    stop_at_key: str | None = None,
) -> GGUFFile:
    """Parse and validate the header of a GGUF file. Tensor data is not read.

    decode_arrays=False skips array contents (fast; Field.value.items is None).
    check_data=False skips the check that tensor data fits in the file (a first raw part).
    stop_at_key: stop right after that KV entry (or at the end of the metadata) and return
    a partial GGUFFile (extra["partial"] is True, no tensors): O(position of the key).
    """
    path = Path(path)
    limits = limits or Limits()
    try:
        fd = open_regular(path)  # a FIFO or a device would block or never end
    except NotRegularFile as e:
        raise GGUFError(e.strerror, path=path, help="give the GGUF file itself") from None
    except OSError as e:
        raise GGUFError(f"cannot open: {e.strerror}", path=path, help="check the path and its permissions") from None
    try:
        size = os.fstat(fd).st_size
        if size < 24:
            raise GGUFError(
                f"file has {size} bytes, smaller than the 24-byte GGUF header",
                path=path,
                offset=0,
                field="header",
                help="the file is empty or truncated",
            )
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as mm:
            return _parse(mm, size, path, limits, decode_arrays, check_data, stop_at_key)
    finally:
        os.close(fd)


def _parse(
    mm, size: int, path: Path, limits: Limits, decode: bool, check_data: bool, stop_at_key: str | None = None
) -> GGUFFile:
    cur = _Cursor(mm, size, path, limits)
    version, n_tensors, n_kv = _header(cur, mm, size, limits)
    kv_start = cur.pos
    fields = _fields(cur, n_kv, limits, decode, stop_at_key)
    if stop_at_key is not None:
        return GGUFFile(
            path,
            version,
            fields,
            [],
            DEFAULT_ALIGNMENT,
            kv_start,
            -1,
            -1,
            -1,
            size,
            extra={"partial": True, "n_kv": n_kv, "n_tensors": n_tensors},
        )
    alignment = _alignment(cur, fields, limits)
    infos_start = cur.pos
    tensors: list[TensorInfo] = []
    names: dict[str, int] = {}
    for i in range(n_tensors):
        tensors.append(_tensor_info(cur, i, names))
    header_end = cur.pos
    data_offset = pad(header_end, alignment)
    data_end = _check_data(tensors, alignment, data_offset, size, path, check_data)
    return GGUFFile(
        path, version, fields, tensors, alignment, kv_start, infos_start, header_end, data_offset, size, data_end
    )


def _header(cur: _Cursor, mm, size: int, limits: Limits) -> tuple[int, int, int]:
    """(version, tensor_count, kv_count), each checked against the limits and the file's size."""
    if mm[0:4] != MAGIC:
        cur.fail(
            f"magic is {bytes(mm[0:4])!r}, not b'GGUF'",
            field="magic",
            offset=0,
            help="not a GGUF file; if it is a later raw part (*.part01, -split-b), join the parts first",
        )
    cur.pos = 4
    version = cur.u32("version")
    if version not in SUPPORTED_VERSIONS:
        cur.fail(f"version {version} is not supported (supported: 2, 3)", field="version", offset=4)
    n_tensors = cur.u64("tensor_count")
    if n_tensors > limits.max_tensors or n_tensors * 24 > size:
        cur.fail(
            f"tensor_count {n_tensors} is larger than the limit {limits.max_tensors} or than the file can hold",
            field="tensor_count",
            offset=8,
        )
    n_kv = cur.u64("kv_count")
    if n_kv > limits.max_kv or n_kv * 13 > size:
        cur.fail(
            f"kv_count {n_kv} is larger than the limit {limits.max_kv} or than the file can hold",
            field="kv_count",
            offset=16,
        )
    return version, n_tensors, n_kv


def _fields(cur: _Cursor, n_kv: int, limits: Limits, decode: bool, stop_at_key: str | None) -> dict[str, Field]:
    """The key-value pairs, up to and including `stop_at_key` when it is given."""
    fields: dict[str, Field] = {}
    for i in range(n_kv):
        at = cur.pos
        kb = cur.string_bytes(f"kv[{i}].key", limits.max_key_bytes)
        try:
            key = kb.decode("utf-8")
        except UnicodeDecodeError:
            cur.fail("key is not valid UTF-8", field=f"kv[{i}].key", offset=at)
        if key in fields:
            cur.fail(f"duplicate key {key!r} (first at byte {fields[key].key_offset})", field=key, offset=at)
        tat = cur.pos
        vtype = _value_type(cur, cur.u32(key + " (type)"), key + " (type)", tat)
        vat = cur.pos
        value = _read_value(cur, vtype, key, 0, decode)
        fields[key] = Field(key, vtype, value, at, vat, cur.pos)
        if key == stop_at_key:
            break
    return fields


def _alignment(cur: _Cursor, fields: dict[str, Field], limits: Limits) -> int:
    if ALIGNMENT_KEY not in fields:
        return DEFAULT_ALIGNMENT
    af = fields[ALIGNMENT_KEY]
    alignment = af.value
    if af.type != ValueType.UINT32 or alignment <= 0 or alignment & (alignment - 1) or alignment > limits.max_alignment:
        cur.fail(
            f"must be a u32 power of two up to {limits.max_alignment}, found {af.type.name} {alignment!r}",
            field=ALIGNMENT_KEY,
            offset=af.value_offset,
        )
    return alignment


def _tensor_info(cur: _Cursor, i: int, names: dict[str, int]) -> TensorInfo:
    """Tensor i's info: name (unique: `names` holds those read, with their offsets), dims, type, offset."""
    at = cur.pos
    what = f"tensor[{i}]"
    nb = cur.string_bytes(what + ".name", MAX_NAME_BYTES)
    try:
        name = nb.decode("utf-8")
    except UnicodeDecodeError:
        cur.fail("tensor name is not valid UTF-8", field=what + ".name", offset=at)
    what = f"tensor {name!r}"
    if name in names:
        cur.fail(f"duplicate tensor name (first at byte {names[name]})", field=what, offset=at)
    names[name] = at
    nd_at = cur.pos
    n_dims = cur.u32(what + " n_dims")
    if not 1 <= n_dims <= MAX_DIMS:
        cur.fail(f"n_dims is {n_dims}, must be 1..{MAX_DIMS}", field=what, offset=nd_at)
    dims = tuple(cur.u64(f"{what} ne[{d}]") for d in range(n_dims))
    n_el = 1
    for d in dims:
        if d >= 2**63:
            cur.fail(f"dimension {d} is negative as int64", field=what, offset=nd_at + 4)
        n_el *= d
        if n_el >= 2**63:
            cur.fail(f"element count of {dims} overflows int64", field=what, offset=nd_at + 4)
    t_at = cur.pos
    raw_type = cur.u32(what + " type")
    try:
        gtype = GGMLType(raw_type)
    except ValueError:
        cur.fail(
            f"unknown ggml type {raw_type}",
            field=what,
            offset=t_at,
            help="the file may need a newer reader, or it is corrupt",
        )
    blck, bsize = BLOCK_LAYOUT[gtype]
    if dims[0] % blck:
        cur.fail(
            f"ne[0]={dims[0]} is not a multiple of the {gtype.name} block size {blck}", field=what, offset=nd_at + 4
        )
    nbytes = n_el // blck * bsize
    offset = cur.u64(what + " offset")
    return TensorInfo(name, dims, gtype, offset, nbytes, at)


def _check_data(
    tensors: list[TensorInfo], alignment: int, data_offset: int, size: int, path: Path, check_data: bool
) -> int:
    """Where the tensor data ends; the data must be dense and in info order (llama.cpp refuses
    anything else), and with `check_data` inside the file."""
    expected = 0
    for t in tensors:
        if t.offset != expected:
            raise GGUFError(
                f"has offset {t.offset}, expected {expected} (tensor data must be dense and in "
                f"order, each tensor padded to {alignment})",
                path=path,
                offset=t.info_offset,
                field=f"tensor {t.name!r}",
            )
        expected += pad(t.nbytes, alignment)
    data_end = data_offset + (tensors[-1].offset + tensors[-1].nbytes if tensors else 0)
    if check_data and tensors and data_end > size:
        last = tensors[-1]
        raise GGUFError(
            f"tensor data ends at byte {data_end} but the file has {size} bytes ({data_end - size} missing)",
            path=path,
            offset=last.info_offset,
            field=f"tensor {last.name!r}",
            help="the file is truncated: re-download it or join all of its parts",
        )
    return data_end
