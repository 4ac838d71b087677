"""gguf-join: reassemble raw byte parts (with sha256) or merge llama.cpp gguf-split shards.

Two kinds of multi-file GGUF exist and must not be confused:
- raw parts (`x.gguf.part00..`, `-split-a/-b`): byte slices of one file; only part 1 starts
  with "GGUF". Joined by concatenation, then validated as a whole.
- gguf-split shards (`x-00001-of-00003.gguf`): each a complete GGUF; shard 1 holds all
  metadata, every shard holds `split.no/split.count/split.tensors.count`. Merged by writing
  one header (without the split keys) and copying every tensor's bytes.
Both copy in the kernel (copy_file_range), write to a temporary name and rename at the end.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path

from cookbook.convert.fileio import Progress
from cookbook.files import atomic_file, atomic_set, copy_range, same_file
from cookbook.gguf.errors import GGUFError
from cookbook.gguf.format import MAGIC, ValueType, pad
from cookbook.gguf.reader import read_gguf
from cookbook.gguf.writer import TensorSpec, encode_kv, raw_kvs, tensor_specs, write_gguf
from cookbook.untrusted import check_regular, open_regular, read_regular

SHARD_RE = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS = "split.no", "split.count", "split.tensors.count"
SPLIT_KEYS = (SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS)
HASH_CHUNK = 8 << 20
SUMS_MAX_BYTES = 16 << 20  # a sha256sums file (100k lines is 7 MB)


# ---------- gguf-split shards ----------


def shard_name(prefix: str, no: int, count: int) -> str:
    """llama.cpp's llama_split_path: numbered from 1."""
    return f"{prefix}-{no:05d}-of-{count:05d}.gguf"


def shard_paths(any_shard) -> list[Path]:
    """All shards of the set `any_shard` belongs to, found by name; refuses a missing one."""
    p = Path(any_shard)
    m = SHARD_RE.match(p.name)
    if not m:
        raise GGUFError("not a gguf-split shard name (expected PREFIX-0000k-of-0000N.gguf)", path=p)
    count = int(m["count"])
    paths = [p.with_name(shard_name(m["prefix"], i, count)) for i in range(1, count + 1)]
    missing = [str(x) for x in paths if not x.exists()]
    if missing:
        raise GGUFError(
            f"{len(missing)} of {count} shards are missing: {', '.join(missing[:3])}",
            path=p,
            help="download every shard of the set into the same folder",
        )
    return paths


def is_shard_set(paths: list[Path]) -> bool:
    if len(paths) == 1 and SHARD_RE.match(paths[0].name):
        return True
    try:
        g = read_gguf(paths[0], decode_arrays=False, check_data=False)
    except GGUFError:
        return False
    return (g.get(SPLIT_COUNT) or 0) > 1


def split_gguf(
    src,
    out_prefix,
    *,
    max_tensors: int | None = None,
    max_bytes: int | None = None,
    progress: bool = False,
    overwrite: bool = False,
) -> list[Path]:
    """Split `src` into llama.cpp-compatible shards `<out_prefix>-0000k-of-0000N.gguf`.

    The shards appear together (written under temporary names, renamed at the end); an
    existing file of a shard's name is refused unless overwrite, and the input never is."""
    g = read_gguf(src, decode_arrays=False)
    if g.get(SPLIT_COUNT):
        raise GGUFError("is already a split shard", path=src, field=SPLIT_COUNT)
    groups: list[list] = [[]]
    size = 0
    for t in g.tensors:
        full = groups[-1] and (
            (max_tensors and len(groups[-1]) >= max_tensors) or (max_bytes and size + t.nbytes > max_bytes)
        )
        if full:
            groups.append([])
            size = 0
        groups[-1].append(t)
        size += t.nbytes
    n = len(groups)
    kv_bytes = raw_kvs(g, g.fields)
    out_paths = [Path(shard_name(str(out_prefix), i + 1, n)) for i in range(n)]
    prog = Progress(g.data_end - g.data_offset, "split", enabled=progress)
    with atomic_set(out_paths, overwrite=overwrite, inputs=[g.path], what="shard") as outs:
        for i, grp in enumerate(groups):
            split_kvs = [
                encode_kv(SPLIT_NO, ValueType.UINT16, i),
                encode_kv(SPLIT_COUNT, ValueType.UINT16, n),
                encode_kv(SPLIT_TENSORS, ValueType.INT32, len(g.tensors)),
            ]
            kvs = split_kvs + (kv_bytes if i == 0 else [])
            align = g.alignment if i == 0 else 32  # shards 2..N carry no general.alignment
            specs = [TensorSpec(t.name, t.dims, t.type, t.nbytes, g.path, g.tensor_offset(t)) for t in grp]
            write_gguf(outs.temp(out_paths[i]), kvs, specs, align, version=g.version, progress=prog)
    prog.finish()
    return out_paths


def merge_shards(shards: list[Path], out, *, progress: bool = True, overwrite: bool = False) -> dict:
    """Merge gguf-split shards into one GGUF (split.* keys dropped, alignment of shard 1 kept)."""
    if len(shards) == 1:
        shards = shard_paths(shards[0])
    files = [read_gguf(p, decode_arrays=False) for p in shards]
    first = files[0]
    count = first.get(SPLIT_COUNT)
    if count is None:
        raise GGUFError(
            "has no split.count key: not the first gguf-split shard",
            path=first.path,
            help="pass the -00001-of-0000N.gguf shard (or all shards in order)",
        )
    if count != len(files):
        raise GGUFError(
            f"split.count is {count} but {len(files)} shards were given",
            path=first.path,
            field=SPLIT_COUNT,
            help="pass every shard of the set, in order",
        )
    names: set[str] = set()
    specs: list[TensorSpec] = []
    for i, g in enumerate(files):
        if g.get(SPLIT_NO) != i:
            raise GGUFError(
                f"split.no is {g.get(SPLIT_NO)}, expected {i} (shard {i + 1} of {count})",
                path=g.path,
                field=SPLIT_NO,
                help="pass the shards in order 00001, 00002, ...",
            )
        if g.get(SPLIT_COUNT) != count:
            raise GGUFError(
                f"split.count is {g.get(SPLIT_COUNT)}, shard 1 says {count}: shards of different sets",
                path=g.path,
                field=SPLIT_COUNT,
            )
        for t in g.tensors:
            if t.name in names:
                raise GGUFError("tensor appears in two shards", path=g.path, field=f"tensor {t.name!r}")
            names.add(t.name)
        specs += tensor_specs(g)
    total = first.get(SPLIT_TENSORS)
    if total is not None and total != len(specs):
        raise GGUFError(
            f"split.tensors.count is {total} but the shards hold {len(specs)} tensors",
            path=first.path,
            field=SPLIT_TENSORS,
            help="a shard is missing or from another set",
        )
    keys = [k for k in first.fields if k not in SPLIT_KEYS]
    kvs = raw_kvs(first, keys)
    prog = Progress(sum(s.nbytes for s in specs), f"merge {len(files)} shards", enabled=progress)
    from cookbook.gguf.writer import encode_header

    header, offsets = encode_header(kvs, specs, first.alignment, first.version)
    expected = len(header) + (offsets[-1] + specs[-1].nbytes if specs else 0)
    for p in shards:
        if same_file(p, out):
            raise GGUFError("is both a shard and the output", path=out, help="choose another output name")
    with atomic_file(out, overwrite=overwrite) as tmp:
        write_gguf(tmp, kvs, specs, first.alignment, version=first.version, progress=prog)
        # Every input was validated and the header is ours: checking the size is enough here
        # (re-parsing the output would cost as much as parsing the inputs again).
        if tmp.stat().st_size != expected:
            raise GGUFError(
                f"wrote {tmp.stat().st_size} bytes, expected {expected}",
                path=out,
                help="a shard changed while merging; run again",
            )
    prog.finish()
    return {"output": str(out), "tensors": len(specs), "bytes": expected, "shards": len(files)}


# ---------- raw byte parts ----------


def split_raw(src, n_parts: int, out_dir=None, *, overwrite: bool = False) -> list[Path]:
    """Cut `src` into n_parts raw byte slices `<name>.part00..` (the form published on PyPI/HF)."""
    src = Path(src)
    fd = open_regular(src)
    size = os.fstat(fd).st_size
    step = -(-size // n_parts)
    out_dir = Path(out_dir) if out_dir else src.parent
    paths = [out_dir / f"{src.name}.part{i:02d}" for i in range(n_parts)]
    try:
        with atomic_set(paths, overwrite=overwrite, inputs=[src], what="part") as outs:
            for i, p in enumerate(paths):
                with open(outs.temp(p), "wb") as out:
                    copy_range(fd, i * step, out.fileno(), max(0, min(step, size - i * step)))
    finally:
        os.close(fd)
    return paths


def read_sha256sums(path) -> dict[str, str]:
    """`sha256sum` output (`HEX  NAME` or `HEX *NAME`) -> {basename: hex}."""
    sums = {}
    try:
        text = read_regular(path, SUMS_MAX_BYTES).decode("utf-8")
    except UnicodeDecodeError as e:
        raise GGUFError(f"is not UTF-8 text (byte {e.start})", path=path, help="use the output of sha256sum") from None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([0-9a-fA-F]{64})\s+\*?(.+)$", line)
        if not m:
            raise GGUFError(f"line {n} is not 'SHA256  NAME'", path=path, help="use the output of sha256sum")
        sums[Path(m[2].strip()).name] = m[1].lower()
    return sums


class _Hasher(threading.Thread):
    """Hashes files (each, and all concatenated) in a thread while the copy runs in the kernel."""

    def __init__(self, paths: list[Path], each: bool, whole: bool):
        super().__init__(daemon=True)
        self.paths, self.want_each, self.want_whole = paths, each, whole
        self.each: dict[Path, str] = {}
        self.whole = hashlib.sha256()
        self.error: BaseException | None = None

    def run(self):
        try:
            if self.want_each and not self.want_whole:
                # parts are independent: hash them on every core (hashlib releases the GIL)
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(max_workers=min(len(self.paths), os.cpu_count() or 1)) as pool:
                    self.each = dict(zip(self.paths, pool.map(self._hash_one, self.paths)))
                return
            for p in self.paths:
                self.each[p] = self._hash_one(p, also=self.whole if self.want_whole else None)
        except BaseException as e:  # reported by join_parts
            self.error = e

    @staticmethod
    def _hash_one(path: Path, also=None) -> str:
        h = hashlib.sha256()
        buf = bytearray(HASH_CHUNK)
        view = memoryview(buf)
        with open(open_regular(path), "rb", buffering=0) as f:
            while n := f.readinto(buf):
                h.update(view[:n])
                if also is not None:
                    also.update(view[:n])
        return h.hexdigest()


PART_SUFFIX_RE = re.compile(r"^(?P<stem>.*?)(?P<key>\d+|[a-z])$")


def _check_name_order(parts: list[Path]) -> None:
    """Parts named alike (x.part00.., x-split-a..) must be given in name order: swapped parts of equal
    size parse alike, so a wrong order would be a valid-looking, wrong file."""
    ms = [PART_SUFFIX_RE.match(p.name) for p in parts]
    if len(parts) < 2 or not all(ms) or len({m["stem"] for m in ms}) != 1:
        return
    keys = [(int(m["key"]) if m["key"].isdigit() else m["key"]) for m in ms]
    if len({type(k) for k in keys}) != 1:
        return
    for a, b, pa, pb in zip(keys, keys[1:], parts, parts[1:]):
        if not a < b:
            raise GGUFError(
                f"parts are out of order: {pb.name} comes after {pa.name}",
                path=pb,
                help="give the parts in name order (x.part00 x.part01 ..., or a shell glob)",
            )


def _validated_as(tmp: Path, shown: Path, what: str):
    """read_gguf of a temporary output; its errors name the real output, not the temporary file."""
    try:
        return read_gguf(tmp, decode_arrays=False)
    except GGUFError as e:
        raise GGUFError(
            f"{what} would not be a valid GGUF: {e.reason}", path=shown, offset=e.offset, field=e.field, help=e.help
        ) from None


def _check_parts(parts: list[Path], out) -> None:
    """Every part a regular file, the first a GGUF header, none a gguf-split shard or the output,
    and their names in order."""
    for p in parts:
        if not p.exists():
            raise GGUFError("part not found", path=p, help="check the part names and their order")
        check_regular(p)  # a FIFO or a device would never end
    with open(parts[0], "rb") as f:
        if f.read(4) != MAGIC:
            raise GGUFError(
                "the first part does not start with b'GGUF'",
                path=parts[0],
                offset=0,
                field="magic",
                help="pass the parts in order; part 1 (.part00, -split-a) first",
            )
    for p in parts[1:]:
        with open(p, "rb") as f:
            if f.read(4) == MAGIC and p.stat().st_size > 24:
                g = None
                try:
                    g = read_gguf(p, decode_arrays=False, check_data=False)
                except GGUFError:
                    pass
                if g is not None and g.get(SPLIT_COUNT):
                    raise GGUFError(
                        "is a gguf-split shard, not a raw part",
                        path=p,
                        help="merge shards with: gguf-join FIRST-00001-of-0000N.gguf -o OUT",
                    )
    _check_name_order(parts)
    for p in parts:
        if same_file(p, out):
            raise GGUFError("is both a part and the output", path=out, help="choose another output name")


def _wanted_sha256(parts: list[Path], out, sha256sums, expect_sha256: str | None) -> tuple[dict[Path, str], str | None]:
    """(each part's sha256 from the sums file, the joined file's): what the join is checked against."""
    want_each: dict[Path, str] = {}
    want_whole = expect_sha256.lower() if expect_sha256 else None
    if sha256sums:
        sums = read_sha256sums(sha256sums)
        want_each = {p: sums[p.name] for p in parts if p.name in sums}
        if not want_each and want_whole is None:
            whole = [h for n, h in sums.items() if n == Path(out).name] or (
                list(sums.values()) if len(sums) == 1 else []
            )
            if not whole:
                raise GGUFError(
                    "lists none of the parts nor the output name",
                    path=sha256sums,
                    help="pass --expect-sha256 HEX for the joined file",
                )
            want_whole = whole[0]
    return want_each, want_whole


def _check_sha256(hasher: _Hasher, want_each: dict[Path, str], want_whole: str | None, out) -> dict[str, str]:
    """The sha256 checked: each part's, then the joined file's; a mismatch is refused."""
    hasher.join()
    if hasher.error:
        raise hasher.error
    for p, h in want_each.items():
        if hasher.each[p] != h:
            raise GGUFError(f"sha256 is {hasher.each[p]}, expected {h}", path=p, help="re-download this part")
    checked = {str(p): h for p, h in want_each.items()}
    if want_whole:
        got = hasher.whole.hexdigest()
        if got != want_whole:
            raise GGUFError(
                f"sha256 of the joined file is {got}, expected {want_whole}",
                path=out,
                help="a part is corrupt or the parts are out of order",
            )
        checked[str(out)] = got
    return checked


def join_parts(
    parts: list[Path],
    out,
    *,
    sha256sums=None,
    expect_sha256: str | None = None,
    verify: bool = True,
    progress: bool = True,
    overwrite: bool = False,
    unverified_ok: bool = False,
) -> dict:
    """Concatenate raw parts into `out`, verifying sha256 (per part and/or whole) and the GGUF structure.

    Without a checksum the order of equal-sized parts cannot be verified: refused unless
    unverified_ok (the CLI's --no-checksum, which warns)."""
    parts = [Path(p) for p in parts]
    _check_parts(parts, out)
    if not (sha256sums or expect_sha256 or unverified_ok) or not verify and not unverified_ok:
        raise GGUFError(
            "no sha256 given: the parts' order and contents cannot be verified (swapped parts of "
            "equal size would parse alike)",
            path=out,
            help="pass --sha256sums FILE or --expect-sha256 HEX (published with the parts), "
            "or --no-checksum to join without checking",
        )
    want_each, want_whole = _wanted_sha256(parts, out, sha256sums, expect_sha256)
    hasher = _Hasher(parts, bool(want_each), bool(want_whole)) if verify and (want_each or want_whole) else None
    total = sum(p.stat().st_size for p in parts)
    prog = Progress(total, f"join {len(parts)} parts", enabled=progress)
    with atomic_file(out, overwrite=overwrite) as tmp:
        if hasher:
            hasher.start()
        with open(tmp, "wb") as dst:
            for p in parts:
                fd = open_regular(p)
                try:
                    copy_range(fd, 0, dst.fileno(), os.fstat(fd).st_size, prog)
                finally:
                    os.close(fd)
        prog.finish()
        checked = _check_sha256(hasher, want_each, want_whole, out) if hasher else {}
        g = _validated_as(tmp, Path(out), f"the join of {len(parts)} parts")
        if g.data_end != g.file_size:
            raise GGUFError(
                f"{g.file_size - g.data_end} bytes after the last tensor",
                path=out,
                help="a part is duplicated or from another file",
            )
    return {
        "output": str(out),
        "bytes": total,
        "parts": len(parts),
        "sha256_checked": checked,
        "tensors": len(g.tensors),
    }


__all__ = ["join_parts", "merge_shards", "split_gguf", "split_raw", "shard_paths", "is_shard_set", "pad"]
