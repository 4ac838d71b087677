"""The evidence bundle: one directory per gate run.

    results.json            per gate: status, reason, measured, thresholds, formulas, items, wall time
    summary.txt             the printed table
    recipe.resolved.json    the resolved recipe the gates ran on (its content hash is in results.json)
    environment.lock        pip freeze of the serving environment (or image digest in results.json)
    models.json, version.json, metrics-before.prom, metrics-after.prom
    transcripts/<gate>.jsonl every request and response
    speed-sweep.png         concurrency sweep plot
    manifest.json           sha256 and size of every other file, written when the run finishes

results.json is rewritten (atomically) after every gate with "complete": false until the
run ends, so a fault midway still leaves readable partial evidence. Once the run has
finished, every later write through the Bundle (summary.txt) rewrites the manifest too;
`cookbook gates verify` refuses a bundle whose files differ from it (cookbook.evidence.manifest).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cookbook.files import atomic_file, atomic_write, clean_leftovers
from cookbook.gates.result import GateResult

RESULTS = "results.json"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1


# Serving environment variables a bundle records (issue 46): those that shape vLLM, the GPU
# runtimes and the model hub, as the gate run's own environment holds them.
SERVING_ENV_PREFIXES = (
    "VLLM_", "CUDA_", "NCCL_", "HF_", "HUGGING", "TORCH", "PYTORCH_", "HSA_", "HIP_", "ROCM_", "ROCR_",
    "NVIDIA_", "OMP_", "KMP_", "MKL_", "PT_HPU_", "HABANA_", "GLM_", "TRITON_", "TOKENIZERS_", "LD_PRELOAD",
)  # fmt: skip
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL")


def serving_env(environ: dict[str, str], recipe_sets: set[str] | frozenset[str]) -> dict[str, str]:
    """The serving variables in `environ` that the recipe's `env:` does not set (those are in
    recipe.resolved.json), sorted; a secret's value (a name holding TOKEN, KEY, ...) is replaced by
    '<set>'."""
    out = {}
    for name in sorted(environ):
        if name.startswith(SERVING_ENV_PREFIXES) and name not in recipe_sets:
            secret = any(w in name.upper() for w in SECRET_WORDS)
            out[name] = "<set>" if secret else environ[name][:2000]
    return out


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def bundle_files(root: Path) -> list[str]:
    """Every path under the bundle (files, links, anything not a folder), relative, '/'-separated,
    sorted; the manifest itself excluded."""
    out = []
    for p in root.rglob("*"):
        rel = p.relative_to(root).as_posix()
        if rel != MANIFEST and (p.is_symlink() or not p.is_dir()):
            out.append(rel)
    return sorted(out)


def manifest_of(root: Path, leave_out: frozenset[str] = frozenset()) -> dict[str, Any]:
    files = {}
    for rel in bundle_files(root):
        p = root / rel
        if rel not in leave_out and p.is_file() and not p.is_symlink():
            files[rel] = {"sha256": sha256_file(p), "size": p.stat().st_size}
    return {"manifest_format": MANIFEST_FORMAT, "algorithm": "sha256", "files": files}


def _gunzip_sha256(path: Path) -> str:
    import gzip

    h = hashlib.sha256()
    with gzip.open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def compact_leftovers(root: Path) -> list[str]:
    """Finish or undo what an interrupted `compact` left (see compact's order): a transcript's .gz the
    manifest does not list yet, beside the .jsonl it does list, is removed (it is written again); a
    .jsonl the manifest no longer lists, beside the .gz it lists with the same content, is removed
    (the new manifest was already in place). Only a file whose content proves it is that copy is
    touched. Returns what was removed."""
    import gzip
    import zlib

    try:
        listed = json.loads((root / MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return []  # not a manifest compact can read: check_manifest says why
    removed = []
    # A compact killed inside atomic_file leaves its hidden temporary (.NAME.PID.XXXXXXXX.tmp) beside
    # the .gz or the manifest it was writing; a dead writer's is removed (files.clean_leftovers).
    targets = {root / MANIFEST} | {root / f"{rel}.gz" for rel in listed if str(rel).endswith(".jsonl")}
    targets |= {root / rel for rel in listed if str(rel).endswith(".jsonl.gz")}
    for target in sorted(targets):
        removed += [p.relative_to(root).as_posix() for p in clean_leftovers(target)]
    for gz in sorted((root / "transcripts").glob("*.jsonl.gz")):
        jl, rel_gz = gz.with_suffix(""), f"transcripts/{gz.name}"
        rel_jl = f"transcripts/{jl.name}"
        if gz.is_symlink() or not gz.is_file() or not jl.is_file() or jl.is_symlink():
            continue
        try:
            same = _gunzip_sha256(gz) == sha256_file(jl)
        except (OSError, EOFError, gzip.BadGzipFile, zlib.error):
            same = False
        if rel_gz not in listed and rel_jl in listed and (same or _cut_short(gz)):
            gz.unlink()
            removed.append(rel_gz)
        elif rel_jl not in listed and rel_gz in listed and same:
            jl.unlink()
            removed.append(rel_jl)
    return removed


def _cut_short(gz: Path) -> bool:
    """A .gz that ends before its gzip trailer (a compact killed while writing it; atomic_file makes
    this rare, a full disk does not)."""
    import gzip
    import zlib

    try:
        with gzip.open(gz, "rb") as fh:
            while fh.read(1 << 20):
                pass
    except EOFError:
        return True
    except (OSError, gzip.BadGzipFile, zlib.error):
        return False
    return False


def compact(root: Path) -> list[tuple[str, int, int]]:
    """gzip every transcripts/*.jsonl of a finished bundle (deterministically: no name, mtime 0) and
    rewrite the manifest, so a bundle committed beside its recipe stays small; the re-check reads
    either form. Returns (file, bytes before, bytes after).

    Crash-safe in this order: every .gz is written (atomically) and checked to hold its .jsonl's
    bytes; then the new manifest, listing the .gz and not the .jsonl, replaces the old one at once;
    only then are the .jsonl removed. A kill at any point leaves a bundle that compact_leftovers
    brings back to one manifest's state, so running compact again finishes the job."""
    import gzip

    done, gone = [], []
    for f in sorted((root / "transcripts").glob("*.jsonl")):
        gz = f.with_name(f.name + ".gz")
        with atomic_file(gz, overwrite=True) as tmp, open(tmp, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as out:
                out.write(f.read_bytes())
        if _gunzip_sha256(gz) != sha256_file(f):
            raise OSError(f"{gz}: does not read back as {f.name}; nothing was removed")
        done.append((f"transcripts/{f.name}", f.stat().st_size, gz.stat().st_size))
        gone.append(f)
    atomic_write(
        root / MANIFEST,
        json.dumps(manifest_of(root, frozenset(f"transcripts/{f.name}" for f in gone)), indent=2, sort_keys=True)
        + "\n",
    )
    for f in gone:
        f.unlink()
    return done


def write_manifest(root: Path) -> None:
    atomic_write(root / MANIFEST, json.dumps(manifest_of(root), indent=2, sort_keys=True) + "\n")


class Bundle:
    def __init__(self, root: Path, header: dict[str, Any]):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "transcripts").mkdir(exist_ok=True)
        self.doc: dict[str, Any] = {
            "bundle_format": 1,
            "started": now(),
            "finished": None,
            "complete": False,
            "fault": None,
            **header,
            "gates": {},
        }
        self.sealed = False  # set by finish(); from then on every write rewrites the manifest

    def path(self, name: str) -> Path:
        return self.root / name

    def write_text(self, name: str, text: str) -> None:
        atomic_write(self.root / name, text)
        if self.sealed:
            write_manifest(self.root)

    def write_json(self, name: str, value: Any) -> None:
        self.write_text(name, json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")

    def set_environment(
        self,
        *,
        lock_text: str | None = None,
        source: str | None = None,
        image_digest: str | None = None,
        image: dict[str, str] | None = None,
    ) -> None:
        """image: {'ref', 'id', 'digest'} of the serving image (cookbook.image.build.identity)."""
        env: dict[str, Any]
        if image:
            env = {"kind": "image", "digest": image["digest"], "id": image["id"], "ref": image["ref"]}
        elif image_digest:
            env = {"kind": "image", "digest": image_digest}
        elif lock_text is not None:
            self.write_text("environment.lock", lock_text)
            env = {
                "kind": "env-lock",
                "file": "environment.lock",
                "source": source,
                "sha256": hashlib.sha256(lock_text.encode()).hexdigest(),
            }
        else:
            env = {"kind": "none", "note": "no --env-lock, --env-lock-cmd or --image-digest given"}
        self.doc["environment"] = env
        self.save()

    def record(self, result: GateResult) -> None:
        self.doc["gates"][result.name] = result.to_json()
        self.save()

    def save(self) -> None:
        self.write_json(RESULTS, self.doc)

    def finish(self, fault: str | None = None) -> None:
        self.doc["finished"] = now()
        self.doc["complete"] = True
        self.doc["fault"] = fault
        self.sealed = True
        self.save()


def load_results(bundle: Path) -> dict[str, Any]:
    f = bundle / RESULTS
    if not f.is_file():
        raise FileNotFoundError(f"{f} not found: not an evidence bundle (run gates/run.sh first)")
    return json.loads(f.read_text(encoding="utf-8"))
