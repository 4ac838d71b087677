"""gguf-inspect: header, metadata, tensor table, quant-type histogram and sizes of a GGUF file."""

from __future__ import annotations

from collections import Counter

from cookbook.gguf.format import ValueType
from cookbook.gguf.reader import GGUFArray, GGUFFile, read_gguf
from cookbook.untrusted import printable

PREVIEW = 8  # array elements shown


def _summarize(value, full: bool):
    if isinstance(value, GGUFArray):
        items = value.items
        if items is None:
            shown = None
        else:
            from cookbook.gguf.reader import _array_to_list

            lst = _array_to_list(value)
            shown = lst if full else lst[:PREVIEW]
        return {"array": value.elem_type.name, "count": value.count, "items": shown}
    if isinstance(value, str) and not full and len(value) > 200:
        return value[:200] + f"... ({len(value)} chars)"
    if isinstance(value, float) and value != value:
        return "nan"
    return value


def describe(g: GGUFFile, full: bool = False) -> dict:
    hist: Counter = Counter()
    hist_bytes: Counter = Counter()
    params = 0
    for t in g.tensors:
        hist[t.type.name] += 1
        hist_bytes[t.type.name] += t.nbytes
        params += t.n_elements
    return {
        "path": str(g.path),
        "version": g.version,
        "file_size": g.file_size,
        "alignment": g.alignment,
        "tensor_count": len(g.tensors),
        "kv_count": len(g.fields),
        "data_offset": g.data_offset,
        "data_bytes": g.data_end - g.data_offset,
        "parameters": params,
        "metadata": {k: {"type": f.type.name, "value": _summarize(f.value, full)} for k, f in g.fields.items()},
        "types": {name: {"tensors": hist[name], "bytes": hist_bytes[name]} for name in sorted(hist)},
        "tensors": [
            {
                "name": t.name,
                "type": t.type.name,
                "shape": list(t.shape),
                "offset": g.tensor_offset(t),
                "bytes": t.nbytes,
            }
            for t in g.tensors
        ],
    }


def _quote(v) -> str:
    """repr, except that strings show their non-printable characters (and non-UTF-8 bytes) escaped."""
    return "'" + printable(v).replace("'", "\\'") + "'" if isinstance(v, str) else repr(v)


def _fmt_value(v) -> str:
    if isinstance(v, dict) and "array" in v:
        items = v["items"]
        shown = "" if items is None else " " + ", ".join(_quote(x) for x in items[:PREVIEW])
        more = ", ..." if v["count"] > PREVIEW else ""
        return f"[{v['array']} x {v['count']}]{shown}{more}"
    return _quote(v)


def render_text(d: dict, show_tensors: bool = True) -> str:
    out = [
        f"{d['path']}",
        f"  GGUF v{d['version']}, {d['file_size']:,} bytes, alignment {d['alignment']}, "
        f"data at byte {d['data_offset']:,} ({d['data_bytes']:,} bytes)",
        f"  {d['tensor_count']} tensors, {d['parameters']:,} parameters, {d['kv_count']} metadata keys",
        "",
        "metadata:",
    ]
    width = max((len(k) for k in d["metadata"]), default=0)
    for k, f in d["metadata"].items():
        out.append(f"  {k:<{width}}  {f['type']:<7} {_fmt_value(f['value'])}")
    out += ["", "tensor types:"]
    for name, h in d["types"].items():
        out.append(f"  {name:<8} {h['tensors']:>6} tensors {h['bytes']:>16,} bytes")
    if show_tensors:
        out += ["", "tensors:"]
        nw = max((len(t["name"]) for t in d["tensors"]), default=0)
        for t in d["tensors"]:
            shape = "x".join(str(s) for s in t["shape"])
            out.append(f"  {t['name']:<{nw}}  {t['type']:<8} {shape:<18} @{t['offset']:<14,} {t['bytes']:>14,}")
    # keys, values and tensor names come from the file: every line is escaped before it is printed
    return "\n".join(printable(line) for line in out)


def inspect(path, as_json: bool = False, full: bool = False, show_tensors: bool = True) -> str:
    import json

    g = read_gguf(path, decode_arrays=True)
    d = describe(g, full)
    if as_json:
        return json.dumps(d, indent=1, default=str)
    return render_text(d, show_tensors)


__all__ = ["describe", "inspect", "render_text", "ValueType"]
