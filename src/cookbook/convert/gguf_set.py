"""gguf-set: set one metadata value with typed parsing.

Same encoded size (bool->bool, u32->u32, a string of the same byte length): the value
bytes are overwritten in place, O(1) in the file size. Otherwise the file is rewritten:
to `out`, or over itself with in_place=True (temp file + rename, so atomic). In a
gguf-split set all metadata lives in shard 1, so that is the file edited.
"""

from __future__ import annotations

import os
from pathlib import Path

from cookbook.convert.fileio import Progress
from cookbook.convert.gguf_join import SHARD_RE, SPLIT_KEYS, _validated_as, shard_name
from cookbook.files import atomic_file
from cookbook.gguf.errors import GGUFError
from cookbook.gguf.format import ALIGNMENT_KEY, INTEGER_RANGE, ValueType
from cookbook.gguf.reader import read_gguf
from cookbook.gguf.writer import encode_kv, encode_value, raw_kvs, tensor_specs, write_gguf
from cookbook.untrusted import open_regular

TRUE_WORDS = {"true", "1", "yes", "on"}
FALSE_WORDS = {"false", "0", "no", "off"}
TYPE_NAMES = {t.name.lower(): t for t in ValueType if t != ValueType.ARRAY} | {
    "str": ValueType.STRING,
    "u8": ValueType.UINT8,
    "i8": ValueType.INT8,
    "u16": ValueType.UINT16,
    "i16": ValueType.INT16,
    "u32": ValueType.UINT32,
    "i32": ValueType.INT32,
    "u64": ValueType.UINT64,
    "i64": ValueType.INT64,
    "f32": ValueType.FLOAT32,
    "f64": ValueType.FLOAT64,
}


def parse_value(text: str, vtype: ValueType, key: str = ""):
    """Text -> a value of vtype. A bool is true/false/1/0/yes/no/on/off; 'false' is False."""
    where = f"{key}: " if key else ""
    if vtype == ValueType.BOOL:
        w = text.strip().lower()
        if w in TRUE_WORDS:
            return True
        if w in FALSE_WORDS:
            return False
        raise GGUFError(f"{where}{text!r} is not a bool", help="use true or false")
    if vtype in INTEGER_RANGE:
        try:
            v = int(text.strip(), 0)
        except ValueError:
            raise GGUFError(f"{where}{text!r} is not an integer", help=f"{vtype.name} wants a whole number") from None
        lo, hi = INTEGER_RANGE[vtype]
        if not lo <= v <= hi:
            raise GGUFError(f"{where}{v} is outside {vtype.name} ({lo}..{hi})")
        return v
    if vtype in (ValueType.FLOAT32, ValueType.FLOAT64):
        try:
            return float(text)
        except ValueError:
            raise GGUFError(f"{where}{text!r} is not a number") from None
    if vtype == ValueType.STRING:
        return text
    raise GGUFError(f"{where}cannot set a value of type {vtype.name}", help="only scalars and strings can be set")


def first_shard(path: Path) -> Path:
    m = SHARD_RE.match(path.name)
    if not m or int(m["no"]) == 1:
        return path
    return path.with_name(shard_name(m["prefix"], 1, int(m["count"])))


def set_value(
    path, key: str, text: str, *, type_name: str | None = None, out=None, in_place: bool = False, progress: bool = True
) -> dict:
    """Set `key` to the parsed `text`. Returns what was done ({"mode": "in-place"|"rewrite", ...})."""
    path = first_shard(Path(path))
    if key in SPLIT_KEYS or key == ALIGNMENT_KEY or key.startswith("GGUF."):
        raise GGUFError(f"{key} describes the file layout and cannot be set", field=key)
    # Validate the whole header (and that the tensor data fits in the file) before any edit: an
    # in-place edit of a file that gguf-inspect refuses would report success on a broken file.
    # The cost is O(header), not O(file): arrays are skipped, not decoded.
    g = read_gguf(path, decode_arrays=False)
    field = g.fields.get(key)
    if type_name is not None:
        vtype = TYPE_NAMES.get(type_name.lower())
        if vtype is None:
            raise GGUFError(f"unknown type {type_name!r}", help="one of: " + ", ".join(sorted(TYPE_NAMES)))
    elif field is not None:
        vtype = field.type
    else:
        raise GGUFError(
            f"key {key!r} is not in the file",
            path=path,
            help="to add it, give its type: --type bool|u32|i32|f32|str|...",
        )
    if vtype == ValueType.ARRAY or (field is not None and field.type == ValueType.ARRAY):
        raise GGUFError(f"{key} is an array; arrays cannot be set", path=path, field=key)
    value = parse_value(text, vtype, key)
    new = encode_value(vtype, value)
    old_value = field.value if field is not None else None
    same_layout = field is not None and field.type == vtype and field.end - field.value_offset == len(new)
    if same_layout and out is None:
        fd = open_regular(path, os.O_RDWR)
        try:
            cur = os.pread(fd, len(new), field.value_offset)
            if cur != new:
                os.pwrite(fd, new, field.value_offset)
        finally:
            os.close(fd)
        return {
            "mode": "in-place",
            "file": str(path),
            "key": key,
            "type": vtype.name,
            "old": old_value,
            "new": value,
            "offset": field.value_offset,
            "bytes": len(new),
            "changed": cur != new,
        }
    if out is None and not in_place:
        raise GGUFError(
            f"the new value changes the header size ({vtype.name}), so the file must be rewritten",
            path=path,
            field=key,
            help="give -o NEW_FILE, or --in-place to replace the file atomically",
        )
    target = Path(out) if out is not None else path
    kvs = raw_kvs(g, g.fields)
    keys = list(g.fields)
    kv = encode_kv(key, vtype, value)
    if key in g.fields:
        kvs[keys.index(key)] = kv
    else:
        kvs.append(kv)
    specs = tensor_specs(g)
    prog = Progress(sum(s.nbytes for s in specs), f"rewrite {target.name}", enabled=progress)
    with atomic_file(target, overwrite=in_place or target == path) as tmp:
        write_gguf(tmp, kvs, specs, g.alignment, version=g.version, progress=prog)
        _validated_as(tmp, target, "the rewritten file")  # validate before the rename
    prog.finish()
    return {"mode": "rewrite", "file": str(target), "key": key, "type": vtype.name, "old": old_value, "new": value}
