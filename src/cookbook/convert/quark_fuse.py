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

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from cookbook import model_folder
from cookbook.convert.fileio import Progress
from cookbook.convert.safetensors_io import (
    STensor,
    Writer,
    nbytes_of,
    plan_shards,
    read_header,
    shard_names,
    write_index,
)
from cookbook.errors import CookbookError
from cookbook.files import copy_range
from cookbook.untrusted import check_regular, is_plain_name, open_regular, printable, read_regular

EXPERT_RE = re.compile(
    r"^(?P<prefix>.*\.mlp\.experts)\.(?P<e>\d+)\.(?P<proj>gate|up|down)_proj\.(?P<kind>weight|weight_scale)$"
)
SHARED_RE = re.compile(
    r"^(?P<prefix>.*\.mlp\.shared_experts?)\.(?P<proj>gate|up|down)_proj\.(?P<kind>weight|weight_scale)$"
)
ROW_CHUNK_BYTES = 16 << 20


class QuarkError(CookbookError, ValueError):
    """A checkpoint this converter cannot repack: what and why, with a help line (escaped: names come from the file)."""

    def __init__(self, reason: str, help: str | None = None):
        super().__init__(printable(reason), help=printable(help) if help else None)


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


INDEX = "model.safetensors.index.json"
JSON_MAX_BYTES = 64 << 20  # an index or config file


def _inside(src_dir: Path, name: str, what: str) -> Path:
    """src_dir/name, refused unless `name` is a plain file name whose file (links followed) is a regular
    file inside src_dir. Nothing a checkpoint says may make the tool read or copy a file elsewhere."""
    if not is_plain_name(name):
        raise QuarkError(
            f"{what}: {name!r} is not a plain file name inside the source folder {src_dir}",
            help="an index may only name files beside it (no '/', '..' or absolute paths)",
        )
    p = src_dir / name
    if p.is_symlink():
        target = p.resolve()
        if not target.is_relative_to(src_dir.resolve()):
            raise QuarkError(
                f"{p}: is a symbolic link to {os.readlink(p)}, outside the source folder; refused",
                help="copy the real file into the folder (an HF cache snapshot links outside "
                "itself: download with `hf download --local-dir DIR` instead)",
            )
    if p.exists():
        check_regular(p)
    return p


def _read_json(path: Path, what: str):
    try:
        return json.loads(read_regular(path, JSON_MAX_BYTES).decode("utf-8"))
    except UnicodeDecodeError as e:
        raise QuarkError(
            f"{path}: {what} is not UTF-8 (byte {e.start})", help=f"fix or re-download {path.name}"
        ) from None
    except (ValueError, RecursionError) as e:
        reason = str(e) if isinstance(e, ValueError) else "nested too deeply"
        raise QuarkError(
            f"{path}: {what} is not valid JSON ({reason})", help=f"fix or re-download {path.name}"
        ) from None


def _read_config(path: Path) -> dict:
    cfg = _read_json(path, "config")
    if not isinstance(cfg, dict):
        raise QuarkError(
            f"{path}: config is a JSON {type(cfg).__name__}, not an object", help="config.json must be a JSON object"
        )
    return cfg


def _index_files(index: Path) -> list[str]:
    data = _read_json(index, "safetensors index")
    wm = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
        raise QuarkError(
            f'{index}: not a valid safetensors index (needs "weight_map": {{tensor: file name}})',
            help="fix or re-download the index, or remove it to read every *.safetensors file",
        )
    return sorted(set(wm.values()))


def _side_files(src_dir: Path) -> list[str]:
    """The non-weight files to copy: regular files (or links to regular files inside src_dir).
    Folders are skipped; FIFOs, devices and links leaving the folder are refused."""
    names = []
    for p in sorted(src_dir.iterdir()):
        skip = p.name in (INDEX, model_folder.MARKER)  # the source's marker says who wrote the source, not the output
        if p.name.endswith(".safetensors") or skip or (p.is_dir() and not p.is_symlink()):
            continue
        if p.is_symlink() and p.is_dir():
            continue
        _inside(src_dir, p.name, "source folder")
        if p.exists():  # a dangling link inside the folder: nothing to copy
            names.append(p.name)
    return names


def _load_tensors(src_dir: Path) -> dict[str, Src]:
    index = src_dir / INDEX
    if index.exists() or index.is_symlink():
        _inside(src_dir, INDEX, "index")
        files = _index_files(index)
    else:
        files = sorted(p.name for p in src_dir.glob("*.safetensors"))
    if not files:
        raise QuarkError(f"{src_dir}: no *.safetensors files", help="point at the checkpoint directory")
    out: dict[str, Src] = {}
    for name in files:
        p = _inside(src_dir, name, f"{index} weight_map" if index.exists() else "source folder")
        if not p.exists():
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
                _check(w is not None, f"{m['prefix']}.{m['proj']}_proj.weight is missing (its weight_scale is present)")
                continue  # consumed with its weight
            if w.t.dtype == "U8" and sc is not None:
                _check(
                    len(w.t.shape) == 2 and w.t.shape[1] * 2 % 32 == 0,
                    f"{key}: shape {w.t.shape} is not [out, in/2] with in a multiple of 32",
                )
                _check(
                    sc.t.dtype == "U8" and sc.t.shape == (w.t.shape[0], w.t.shape[1] * 2 // 32),
                    f"{key}: scale shape {sc.t.shape} does not match weight {w.t.shape}",
                )
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
        _check(
            dtypes == ({"BF16"} if bf16 else {"U8"}),
            f"{prefix}.{e}: dtypes {sorted(dtypes)}, expected "
            + ("BF16" if bf16 else "U8 weights and U8 (E8M0) scales"),
        )
        if ref is None:
            ref = shapes
        _check(shapes == ref, f"{prefix}.{e}: shapes {shapes} differ from expert 0 {ref}")
    g = by_e[0][("gate", "weight")].t.shape
    d = by_e[0][("down", "weight")].t.shape
    _check(len(g) == 2 and len(d) == 2, f"{prefix}: expert weights must be 2-D, got {g} and {d}")
    stats["experts"] += n
    u = by_e[0][("up", "weight")].t.shape
    _check(u == g, f"{prefix}.0.up_proj.weight is {u}, expected {g} like gate_proj.weight")
    if bf16:
        inter, hidden = g
        _check(hidden % 32 == 0 and inter % 32 == 0, f"{prefix}: H={hidden}, I={inter} must be multiples of 32")
        _check(
            d == (hidden, inter),
            f"{prefix}.0.down_proj.weight is {d}, expected {(hidden, inter)} = [H, I] "
            f"from gate_proj.weight {g} = [I, H] (transposed?)",
        )
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
    hidden = half_h * 2
    _check(
        hidden % 32 == 0 and inter % 32 == 0,
        f"{prefix}: H={hidden} (from gate_proj.weight {g} = [I, H/2]) "
        f"and I={inter} must be multiples of 32 (one E8M0 scale per 32 elements)",
    )
    _check(
        d == (hidden, inter // 2),
        f"{prefix}.0.down_proj.weight is {d}, expected {(hidden, inter // 2)} = "
        f"[H, I/2] from gate_proj.weight {g} = [I, H/2] (transposed?)",
    )
    for proj, want in (("gate", (inter, hidden // 32)), ("up", (inter, hidden // 32)), ("down", (hidden, inter // 32))):
        sh = by_e[0][(proj, "weight_scale")].t.shape
        _check(
            sh == want,
            f"{prefix}.0.{proj}_proj.weight_scale is {sh}, expected {want} "
            "(one E8M0 scale per 32 along the input axis)",
        )
    gs = by_e[0][("gate", "weight_scale")].t.shape
    stats["fused_layers"] += 1
    cat = lambda kind, projs: [by_e[e][(p, kind)] for e in range(n) for p in projs]  # noqa: E731
    return [
        OutTensor(f"{prefix}.w13_weight", "U8", (n, 2 * inter, half_h), "concat", cat("weight", ("gate", "up"))),
        OutTensor(
            f"{prefix}.w13_weight_scale", "U8", (n, 2 * inter, gs[1]), "concat", cat("weight_scale", ("gate", "up"))
        ),
        OutTensor(f"{prefix}.w2_weight", "U8", (n, d[0], d[1]), "concat", cat("weight", ("down",))),
        OutTensor(
            f"{prefix}.w2_weight_scale", "U8", (n, d[0], d[1] * 2 // 32), "concat", cat("weight_scale", ("down",))
        ),
    ]


class _Fds:
    def __init__(self):
        self.fds: dict[Path, int] = {}

    def __call__(self, p: Path) -> int:
        if p not in self.fds:
            self.fds[p] = open_regular(p)
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


class _Scratch:
    """Side files for the scales of encoded experts, in the output's temporary folder.

    Their names are random (mkstemp: O_EXCL, mode 0600), never derived from a tensor name, so
    no name in a checkpoint can make the tool write, truncate or delete a file elsewhere.
    """

    def __init__(self, folder: Path):
        self.folder, self.files = folder, {}

    def create(self, tensor: str):
        fd, name = tempfile.mkstemp(dir=self.folder, prefix=".scales-", suffix=".part")
        self.files[tensor] = Path(name)
        return os.fdopen(fd, "wb")

    def take(self, tensor: str) -> Path | None:
        return self.files.pop(tensor, None)

    def remove_all(self) -> None:
        for p in self.files.values():
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        self.files.clear()


def _emit(w: Writer, o: OutTensor, fds: _Fds, prog: Progress, scale_rule: str, scratch: _Scratch) -> None:
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
            vals = mxfp4.dequantize(
                np.frombuffer(packed, np.uint8).reshape(n, -1), np.frombuffer(scales, np.uint8).reshape(n, -1)
            )
            w.write(o.name, mxfp4.float32_to_bf16_bits(vals).tobytes())
            prog.advance(len(packed) + len(scales))
            r0 += n
        return
    # BF16 -> MXFP4 in one pass: the packed codes go to the output, the scales to a side file
    # that the scale tensor (emitted next) copies in, so each expert is encoded once.
    side = scratch.take(o.name) if o.op == "encode_scales" else None
    if side is not None:
        fd = os.open(side, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            n = os.fstat(fd).st_size
            w.reserve(o.name, n)
            copy_range(fd, 0, w.f.fileno(), n)
        finally:
            os.close(fd)
            side.unlink()
        return
    with scratch.create(o.name + "_scale") if o.op == "encode_packed" else open(os.devnull, "wb") as side_f:
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


def fuse_checkpoint(
    src_dir,
    out_dir,
    *,
    shard_bytes: int = 4 << 30,
    scale_rule: str = "even",
    force: bool = False,
    progress: bool = True,
) -> dict:
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    model_folder.check(out_dir)
    if not src_dir.is_dir():
        raise QuarkError(f"{src_dir}: not a directory")
    tensors = _load_tensors(src_dir)  # a bad shard is a SafetensorsError (one message, help line kept)
    outs, stats = plan(tensors)
    if not stats["fused_layers"] and not stats["encoded_layers"]:
        raise QuarkError(
            f"{src_dir}: no per-expert tensors (model.layers.L.mlp.experts.E.*_proj.weight)",
            help="the checkpoint is already fused, or is not a MoE model",
        )
    specs = [(o.name, o.dtype, o.shape) for o in outs]
    shards = plan_shards(specs, shard_bytes)
    files = shard_names(len(shards))
    by_name = {o.name: o for o in outs}
    total_in = sum(s.t.nbytes for s in tensors.values())
    prog = Progress(total_in, "fuse", enabled=progress)
    side_files = _side_files(src_dir)  # checked before anything is written
    cfg = _read_config(src_dir / "config.json") if "config.json" in side_files else None
    fds = _Fds()
    try:
        with model_folder.replacing(out_dir, force=force) as tmp:
            scratch = _Scratch(tmp)
            try:
                for fname, grp in zip(files, shards):
                    w = Writer(tmp / fname, grp, metadata={"format": "pt"})
                    for name, _, _ in grp:
                        _emit(w, by_name[name], fds, prog, scale_rule, scratch)
                    w.close()
            finally:
                scratch.remove_all()
            write_index(tmp, shards)
            for name in side_files:  # plain names, regular files inside src_dir (links copied as files)
                if name == "config.json":
                    (tmp / name).write_text(json.dumps(_update_config(cfg, outs), indent=2) + "\n")
                else:
                    shutil.copyfile(src_dir / name, tmp / name)
            prog.finish()
    except FileExistsError:
        raise QuarkError(f"output directory {out_dir} is not empty", help="choose a new one or pass --force") from None
    finally:
        fds.close()
    return {
        "output": str(out_dir),
        "shards": files,
        "tensors_out": len(outs),
        "bytes_in": total_in,
        "bytes_out": sum(nbytes_of(*s[1:]) for s in specs),
        "scale_rule": scale_rule,
        **stats,
    }
