"""quark-mxfp4-fuse: AMD Quark MXFP4 checkpoint -> the fused-expert layout of vLLM's MoE layer.

Input (Quark export, one tensor per expert; `formats.md` section 3):
  model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight        U8 [out, in/2]  (E2M1, even element in the low nibble)
  model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight_scale  U8 [out, in/32] (E8M0)
  model.layers.L.mlp.shared_experts.{gate,up,down}_proj.{weight,weight_scale}
  the MTP layer's experts in BF16 (`.weight` only).
Output (vLLM FusedMoE parameter names and shapes, `quark_moe.py create_weights`):
  model.layers.L.mlp.experts.w13_weight        U8 [E, 2I, H/2]   per expert: gate rows, then up rows
  model.layers.L.mlp.experts.w13_weight_scale  U8 [E, 2I, H/32]
  model.layers.L.mlp.experts.w2_weight         U8 [E, H, I/2]
  model.layers.L.mlp.experts.w2_weight_scale   U8 [E, H, I/32]
- MXFP4 experts are copied byte for byte (kernel copies, nothing decoded).
- Shared experts are dequantized to BF16 (exact: E2M1 x 2^k fits BF16 unless the scale is NaN).
- BF16 experts (the MTP layer) are encoded with cookbook.mxfp4 (scale rule selectable).
- Every other tensor is copied unchanged; other files (config, tokenizer) are copied.
Memory stays bounded by one expert tensor (or one row chunk), whatever the checkpoint size.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from cookbook.convert.fileio import Progress, atomic_dir
from cookbook.convert.safetensors_io import (
    SafetensorsError, STensor, Writer, nbytes_of, plan_shards, read_header, shard_names, write_index,
)
from cookbook.filecopy import copy_range

EXPERT_RE = re.compile(r"^(?P<prefix>.*\.mlp\.experts)\.(?P<e>\d+)\.(?P<proj>gate|up|down)_proj\.(?P<kind>weight|weight_scale)$")
SHARED_RE = re.compile(r"^(?P<prefix>.*\.mlp\.shared_experts?)\.(?P<proj>gate|up|down)_proj\.(?P<kind>weight|weight_scale)$")
ROW_CHUNK_BYTES = 16 << 20


class QuarkError(ValueError):
    def __init__(self, reason: str, help: str | None = None):
        super().__init__(reason + (f"\n  help: {help}" if help else ""))


@dataclass
class Src:
    file: Path
    t: STensor


@dataclass
class OutTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    op: str  # copy | concat | dequant_bf16 | encode_packed | encode_scales
    srcs: list = field(default_factory=list)  # list[Src] (for dequant: [weight, scale])


def _load_tensors(src_dir: Path) -> dict[str, Src]:
    index = src_dir / "model.safetensors.index.json"
    if index.exists():
        try:
            files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError):
            raise QuarkError(f"{index}: not a valid safetensors index (needs a weight_map)") from None
    else:
        files = sorted(p.name for p in src_dir.glob("*.safetensors"))
    if not files:
        raise QuarkError(f"{src_dir}: no *.safetensors files", help="point at the checkpoint directory")
    out: dict[str, Src] = {}
    for name in files:
        p = src_dir / name
        if not p.is_file():
            raise QuarkError(f"{p}: listed in the index but missing", help="download every shard")
        tensors, _ = read_header(p)
        for tname, t in tensors.items():
            if tname in out:
                raise QuarkError(f"tensor {tname!r} is in both {out[tname].file.name} and {name}")
            out[tname] = Src(p, t)
    return out


def _check(cond: bool, reason: str) -> None:
    if not cond:
        raise QuarkError(reason, help="is this an AMD Quark MXFP4 export (per_group, group_size 32, e8m0 scales)?")


def plan(tensors: dict[str, Src]) -> tuple[list[OutTensor], dict]:
    """The output tensors, in input order with each layer's experts fused where its expert 0 was."""
    experts: dict[str, dict] = defaultdict(lambda: defaultdict(dict))  # prefix -> e -> (proj, kind) -> Src
    first_seen: dict[str, int] = {}
    shared: dict[str, dict] = defaultdict(dict)
    order: list[tuple[int, str, str]] = []  # (position, kind, key)
    for i, (name, s) in enumerate(tensors.items()):
        m = EXPERT_RE.match(name)
        if m:
            experts[m["prefix"]][int(m["e"])][(m["proj"], m["kind"])] = s
            if m["prefix"] not in first_seen:
                first_seen[m["prefix"]] = i
                order.append((i, "experts", m["prefix"]))
            continue
        m = SHARED_RE.match(name)
        if m:
            shared[m["prefix"]][(m["proj"], m["kind"])] = s
            order.append((i, "shared", name))
            continue
        order.append((i, "copy", name))

    out: list[OutTensor] = []
    stats = {"fused_layers": 0, "encoded_layers": 0, "shared_to_bf16": 0, "copied": 0, "experts": 0}
    for _, kind, key in order:
        if kind == "copy":
            s = tensors[key]
            out.append(OutTensor(key, s.t.dtype, s.t.shape, "copy", [s]))
            stats["copied"] += 1
        elif kind == "shared":
            m = SHARED_RE.match(key)
            group = shared[m["prefix"]]
            w, sc = group.get((m["proj"], "weight")), group.get((m["proj"], "weight_scale"))
            if m["kind"] == "weight_scale":
                continue  # consumed with its weight
            if w.t.dtype == "U8" and sc is not None:
                _check(sc.t.dtype == "U8" and sc.t.shape == (w.t.shape[0], w.t.shape[1] * 2 // 32),
                       f"{key}: scale shape {sc.t.shape} does not match weight {w.t.shape}")
                out.append(OutTensor(key, "BF16", (w.t.shape[0], w.t.shape[1] * 2), "dequant_bf16", [w, sc]))
                stats["shared_to_bf16"] += 1
            else:
                out.append(OutTensor(key, w.t.dtype, w.t.shape, "copy", [w]))
                stats["copied"] += 1
        else:
            out += _fuse_layer(key, experts[key], stats)
    return out, stats


def _fuse_layer(prefix: str, by_e: dict, stats: dict) -> list[OutTensor]:
    n = len(by_e)
    _check(sorted(by_e) == list(range(n)), f"{prefix}: experts {sorted(by_e)[:8]}... are not 0..{n - 1}")
    bf16 = by_e[0][("gate", "weight")].t.dtype == "BF16" if ("gate", "weight") in by_e[0] else False
    kinds = ("weight",) if bf16 else ("weight", "weight_scale")
    ref = None
    for e in range(n):
        for proj in ("gate", "up", "down"):
            for k in kinds:
                _check((proj, k) in by_e[e], f"{prefix}.{e}.{proj}_proj.{k} is missing")
        shapes = tuple(by_e[e][(p, k)].t.shape for p in ("gate", "up", "down") for k in kinds)
        dtypes = {by_e[e][(p, k)].t.dtype for p in ("gate", "up", "down") for k in kinds}
        _check(dtypes == ({"BF16"} if bf16 else {"U8"}), f"{prefix}.{e}: dtypes {sorted(dtypes)}, expected "
               + ("BF16" if bf16 else "U8 weights and U8 (E8M0) scales"))
        if ref is None:
            ref = shapes
        _check(shapes == ref, f"{prefix}.{e}: shapes {shapes} differ from expert 0 {ref}")
    g = by_e[0][("gate", "weight")].t.shape
    d = by_e[0][("down", "weight")].t.shape
    _check(len(g) == 2 and len(d) == 2, f"{prefix}: expert weights must be 2-D, got {g} and {d}")
    stats["experts"] += n
    if bf16:
        inter, hidden = g
        _check(hidden % 32 == 0 and inter % 32 == 0, f"{prefix}: H={hidden}, I={inter} must be multiples of 32")
        stats["encoded_layers"] += 1
        w13 = [by_e[e][(p, "weight")] for e in range(n) for p in ("gate", "up")]
        w2 = [by_e[e][("down", "weight")] for e in range(n)]
        return [
            OutTensor(f"{prefix}.w13_weight", "U8", (n, 2 * inter, hidden // 2), "encode_packed", w13),
            OutTensor(f"{prefix}.w13_weight_scale", "U8", (n, 2 * inter, hidden // 32), "encode_scales", w13),
            OutTensor(f"{prefix}.w2_weight", "U8", (n, hidden, inter // 2), "encode_packed", w2),
            OutTensor(f"{prefix}.w2_weight_scale", "U8", (n, hidden, inter // 32), "encode_scales", w2),
        ]
    inter, half_h = g
    gs = by_e[0][("gate", "weight_scale")].t.shape
    _check(gs == (inter, half_h * 2 // 32), f"{prefix}.0.gate_proj.weight_scale is {gs}, expected "
           f"{(inter, half_h * 2 // 32)} (one E8M0 scale per 32 along the input axis)")
    stats["fused_layers"] += 1
    cat = lambda kind, projs: [by_e[e][(p, kind)] for e in range(n) for p in projs]  # noqa: E731
    return [
        OutTensor(f"{prefix}.w13_weight", "U8", (n, 2 * inter, half_h), "concat", cat("weight", ("gate", "up"))),
        OutTensor(f"{prefix}.w13_weight_scale", "U8", (n, 2 * inter, gs[1]), "concat",
                  cat("weight_scale", ("gate", "up"))),
        OutTensor(f"{prefix}.w2_weight", "U8", (n, d[0], d[1]), "concat", cat("weight", ("down",))),
        OutTensor(f"{prefix}.w2_weight_scale", "U8", (n, d[0], d[1] * 2 // 32), "concat",
                  cat("weight_scale", ("down",))),
    ]


class _Fds:
    def __init__(self):
        self.fds: dict[Path, int] = {}

    def __call__(self, p: Path) -> int:
        if p not in self.fds:
            self.fds[p] = os.open(p, os.O_RDONLY)
        return self.fds[p]

    def close(self):
        for fd in self.fds.values():
            os.close(fd)


def _rows(src: Src, fd: int):
    """Yield (row_count, bytes) chunks of a 2-D tensor, bounded by ROW_CHUNK_BYTES."""
    rows = src.t.shape[0]
    row_bytes = src.t.nbytes // rows if rows else 0
    step = max(1, ROW_CHUNK_BYTES // max(row_bytes, 1))
    for r in range(0, rows, step):
        n = min(step, rows - r)
        data = os.pread(fd, n * row_bytes, src.t.start + r * row_bytes)
        if len(data) != n * row_bytes:
            raise QuarkError(f"{src.file}: tensor {src.t.name!r} is truncated")
        yield n, data


def _emit(w: Writer, o: OutTensor, fds: _Fds, prog: Progress, scale_rule: str, scratch: Path) -> None:
    import numpy as np

    from cookbook import mxfp4

    if o.op in ("copy", "concat"):
        for s in o.srcs:
            w.reserve(o.name, s.t.nbytes)
            copy_range(fds(s.file), s.t.start, w.f.fileno(), s.t.nbytes, prog)
        return
    if o.op == "dequant_bf16":
        wt, sc = o.srcs
        sc_row = sc.t.nbytes // sc.t.shape[0]
        r0 = 0
        for n, packed in _rows(wt, fds(wt.file)):
            scales = os.pread(fds(sc.file), n * sc_row, sc.t.start + r0 * sc_row)
            vals = mxfp4.dequantize(np.frombuffer(packed, np.uint8).reshape(n, -1),
                                    np.frombuffer(scales, np.uint8).reshape(n, -1))
            w.write(o.name, mxfp4.float32_to_bf16_bits(vals).tobytes())
            prog.advance(len(packed) + len(scales))
            r0 += n
        return
    # BF16 -> MXFP4 in one pass: the packed codes go to the output, the scales to a side file
    # that the scale tensor (emitted next) copies in, so each expert is encoded once.
    side = scratch / f".{o.name}_scale.part" if o.op == "encode_packed" else scratch / f".{o.name}.part"
    if o.op == "encode_scales" and side.exists():
        fd = os.open(side, os.O_RDONLY)
        try:
            n = os.fstat(fd).st_size
            w.reserve(o.name, n)
            copy_range(fd, 0, w.f.fileno(), n)
        finally:
            os.close(fd)
            side.unlink()
        return
    with open(side, "wb") if o.op == "encode_packed" else open(os.devnull, "wb") as side_f:
        for s in o.srcs:
            for n, raw in _rows(s, fds(s.file)):
                x = mxfp4.bf16_bits_to_float32(np.frombuffer(raw, np.uint16).reshape(n, -1))
                packed, scales = mxfp4.quantize(x, scale_rule=scale_rule)
                if o.op == "encode_packed":
                    w.write(o.name, packed.tobytes())
                    side_f.write(scales.tobytes())
                    prog.advance(len(raw))
                else:
                    w.write(o.name, scales.tobytes())


def _update_config(cfg: dict, out_tensors: list[OutTensor]) -> dict:
    """Shared experts become BF16: list them in the Quark exclude list; encoded MTP experts leave it."""
    qc = cfg.get("quantization_config")
    if not isinstance(qc, dict) or not isinstance(qc.get("exclude"), list):
        return cfg
    exclude = list(qc["exclude"])
    for o in out_tensors:
        module = o.name.rsplit(".", 1)[0]
        if o.op == "dequant_bf16" and module not in exclude:
            exclude.append(module)
        if o.op.startswith("encode_"):
            exclude = [x for x in exclude if not (x.startswith(module + ".") or x == module)]
    qc["exclude"] = exclude
    return cfg


def fuse_checkpoint(src_dir, out_dir, *, shard_bytes: int = 4 << 30, scale_rule: str = "even", force: bool = False,
                    progress: bool = True) -> dict:
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    if not src_dir.is_dir():
        raise QuarkError(f"{src_dir}: not a directory")
    try:
        tensors = _load_tensors(src_dir)
    except SafetensorsError as e:
        raise QuarkError(str(e)) from None
    outs, stats = plan(tensors)
    if not stats["fused_layers"] and not stats["encoded_layers"]:
        raise QuarkError(f"{src_dir}: no per-expert tensors (model.layers.L.mlp.experts.E.*_proj.weight)",
                         help="the checkpoint is already fused, or is not a MoE model")
    specs = [(o.name, o.dtype, o.shape) for o in outs]
    shards = plan_shards(specs, shard_bytes)
    files = shard_names(len(shards))
    by_name = {o.name: o for o in outs}
    total_in = sum(s.t.nbytes for s in tensors.values())
    prog = Progress(total_in, "fuse", enabled=progress)
    fds = _Fds()
    try:
        with atomic_dir(out_dir, force=force) as tmp:
            for fname, grp in zip(files, shards):
                w = Writer(tmp / fname, grp, metadata={"format": "pt"})
                for name, _, _ in grp:
                    _emit(w, by_name[name], fds, prog, scale_rule, tmp)
                w.close()
            write_index(tmp, shards)
            for p in sorted(src_dir.iterdir()):
                if p.is_file() and not p.name.endswith(".safetensors") and p.name != "model.safetensors.index.json":
                    if p.name == "config.json":
                        cfg = _update_config(json.loads(p.read_text()), outs)
                        (tmp / p.name).write_text(json.dumps(cfg, indent=2) + "\n")
                    else:
                        shutil.copy2(p, tmp / p.name)
            prog.finish()
    except FileExistsError:
        raise QuarkError(f"output directory {out_dir} is not empty", help="choose a new one or pass --force") from None
    finally:
        fds.close()
    return {"output": str(out_dir), "shards": files, "tensors_out": len(outs), "bytes_in": total_in,
            "bytes_out": sum(nbytes_of(*s[1:]) for s in specs), "scale_rule": scale_rule, **stats}
