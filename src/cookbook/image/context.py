"""The build context of a recipe's image, planned before anything is written: the port's
Dockerfile, the repository subset the image carries as cookbook/ (package, fix pack, recipes,
the port, the kernels the recipe names), the resolved recipe and its launch block, the wheel
set of an offline build, and the port's named build inputs. `--dry-run` prints the plan;
a build writes it to .cache/image/<slug>/context and hands that folder to Docker."""

from __future__ import annotations

import errno
import json
import os
import platform as host
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cookbook.errors import CookbookError
from cookbook.files import atomic_dir, repo_root
from cookbook.image import bases, ports, reference
from cookbook.plan.launch_block import launch_block
from cookbook.recipe.checks_paths import dockerfile_problem
from cookbook.recipe.resolve import ResolvedRecipe
from cookbook.untrusted import printable, read_regular

BUILD_HOST_ARCHES = ("x86_64", "amd64")  # every port's Dockerfile builds linux/amd64
WHEELS = Path(".cache") / "wheels"
SKIP_PARTS = {"__pycache__", ".pytest_cache", "evidence", "results"}
LABEL = "org.opencontainers.image"
DOCKERFILE_MAX = 1 << 20  # bytes: a Dockerfile is text


@dataclass
class Plan:
    slug: str
    resolved: ResolvedRecipe
    port: ports.Port
    base_def: bases.Base
    base: str | None
    tag: str
    dockerfile: str  # its text
    dockerfile_rel: str  # where it is in this repository
    buildargs: dict[str, str]
    labels: dict[str, str]
    files: dict[str, Path | str] = field(default_factory=dict)  # context path -> source file or text
    missing_inputs: list[ports.BuildInput] = field(default_factory=list)
    missing_wheels: CookbookError | None = None  # raised by a build, printed by a dry run

    def build_command(self, context_dir: str) -> str:
        args = " ".join(f"--build-arg {k}={_q(v)}" for k, v in sorted(self.buildargs.items()))
        labels = " ".join(f"--label {k}={_q(v)}" for k, v in sorted(self.labels.items()))
        return f"docker build -t {_q(self.tag)} {args} {labels} {_q(context_dir)}"


def _q(v: str) -> str:
    import shlex

    return shlex.quote(v)


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _refuse_special(path: Path, st: os.stat_result) -> None:
    """The context carries regular files only: a link (which could point anywhere on this host) or a
    FIFO, device or socket in a folder the image copies is refused, naming it."""
    from cookbook.untrusted import file_kind, printable

    kind = "symbolic link" if stat.S_ISLNK(st.st_mode) else file_kind(st.st_mode)
    raise CookbookError(
        f"{printable(path)}: is a {kind}; the image's context carries regular files only",
        help="replace it with the file itself (a link is never followed into the context), or remove it",
    )


def _tree(root: Path, rel: str) -> list[str]:
    """The regular files under root/rel (or rel itself), without following a link anywhere."""
    top = root / rel
    try:
        st = os.lstat(top)
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(st.st_mode):
        if not stat.S_ISREG(st.st_mode):
            _refuse_special(top, st)
        return [rel]
    out = []
    for folder, dirs, files in os.walk(top):  # never descends into a linked folder
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_PARTS)
        for name in sorted([*dirs, *files]):
            path = here / name
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode) or name.endswith(".pyc"):
                continue
            if not stat.S_ISREG(st.st_mode):
                _refuse_special(path, st)
            out.append(path.relative_to(root).as_posix())
    return out


def _declared_args(dockerfile: str) -> set[str]:
    return set(re.findall(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)", dockerfile, flags=re.M))


def _fix_set(resolved: ResolvedRecipe) -> tuple[str, str, list[str]]:
    """(profile, fix-set hash, opt-in names); empty strings when the recipe has no profile."""
    fx = resolved.recipe.image.fixes
    if not fx.profile:
        return "", "", []
    from cookbook.fixes.pack import resolve_profile, set_hash

    opt = [f.name for f in fx.opt_in]
    profile, fixes = resolve_profile(fx.profile, opt)
    return fx.profile, set_hash(profile, fixes), opt


def _engine_pin(resolved: ResolvedRecipe) -> str:
    e = resolved.recipe.image.engine
    if e.version:
        return f"{e.package}=={e.version}"
    return " ".join(x for x in (e.package, e.repo, e.branch, e.commit) if x)


def check_host(plan_platform: str, machine: str | None = None) -> None:
    machine = (machine or host.machine()).lower()
    if machine not in BUILD_HOST_ARCHES:
        raise CookbookError(
            f"this host ({machine}) cannot build the {plan_platform} image: every port builds linux/amd64 "
            "and installs x86-64 wheels",
            help="build on an x86-64 Linux machine",
        )


def _is_placeholder(base: str | None) -> bool:
    return not base or (base.startswith("<") and base.endswith(">"))


def plan(resolved: ResolvedRecipe, base: str | None = None, tag: str | None = None, root: Path | None = None) -> Plan:
    root = root or repo_root()
    tag, base = reference.check(tag, "--tag"), reference.check(base, "--base")
    recipe = resolved.recipe
    platform_id = recipe.hardware.platform
    check_host(platform_id)
    port = ports.for_recipe(recipe, root)
    base_def = bases.for_platform(platform_id, root)
    chosen = (
        base
        or (None if _is_placeholder(recipe.image.base) else recipe.image.base)
        or port.base_for(recipe.image.engine.version)
        or base_def.image
    )
    if chosen and not _is_placeholder(chosen):
        reference.check(chosen, f"the base image of {resolved.slug}")
    dockerfile_rel = recipe.image.dockerfile or f"{port.folder}/{port.dockerfile}"
    why = dockerfile_problem(root, dockerfile_rel)  # lint's R018, in its words
    if why:
        field = "image.dockerfile" if recipe.image.dockerfile else f"{port.folder}/port.yaml dockerfile"
        raise CookbookError(
            f"{field}: {printable(dockerfile_rel[:200])} {why}",
            help="name a Dockerfile of this repository by its path from the checkout's root",
        )
    try:
        dockerfile = read_regular(root / dockerfile_rel, DOCKERFILE_MAX).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CookbookError(f"{dockerfile_rel}: cannot be read as UTF-8 text ({e})") from None
    profile, fix_hash, opt_in = _fix_set(resolved)
    engine = recipe.image.engine
    args = {
        "BASE": chosen or "",
        "PLATFORM": platform_id,
        "RECIPE": resolved.slug,
        "ENGINE_DIST": engine.package,
        "ENGINE_PIN": engine.version or "",
        "FIX_PROFILE": profile,
        "FIX_OPT_IN": " ".join(opt_in),
    }
    if port.wheels:
        from cookbook.engine import pin

        args["TORCH_PIN"] = pin().torch
    digest = resolved.content_hash.split(":", 1)[1]
    labels = {
        f"{LABEL}.source": _git(root, "remote", "get-url", "origin") or f"file://{root}",
        f"{LABEL}.revision": _git(root, "rev-parse", "HEAD") or "unknown",
        f"{LABEL}.title": f"cookbook/{resolved.slug}",
        f"{LABEL}.base.name": chosen or "",
        "io.cookbook.recipe": resolved.slug + (f" --quant {resolved.quant}" if resolved.quant else ""),
        "io.cookbook.recipe-hash": resolved.content_hash,
        "io.cookbook.fix-set-hash": fix_hash or "none",
        "io.cookbook.engine-pin": _engine_pin(resolved),
    }
    p = Plan(
        slug=resolved.slug,
        resolved=resolved,
        port=port,
        base_def=base_def,
        base=chosen,
        tag=tag or f"cookbook/{resolved.slug}:{digest[:12]}",
        dockerfile=dockerfile,
        dockerfile_rel=dockerfile_rel,
        buildargs={k: v for k, v in args.items() if k in _declared_args(dockerfile)},
        labels=labels,
    )
    _fill(p, root)
    return p


def _fill(p: Plan, root: Path) -> None:
    recipe = p.resolved.recipe
    p.files["Dockerfile"] = root / p.dockerfile_rel
    rels = ["pyproject.toml", "README.md", "src/cookbook", "fixes", "recipes", "gates", "ports/require-input.sh"]
    rels += ["ports/check-image.sh", p.port.folder]
    for k in recipe.image.kernels:
        _context_path(f"kernels/{k.name}")  # a kernel name is a folder under kernels/, nothing else
    rels += [f"kernels/{k.name}/{f}" for k in recipe.image.kernels for f in ("build.sh", "README.md")]
    for rel in rels:
        for f in _tree(root, rel):
            p.files[f"cookbook/{f}"] = root / f
    p.files["cookbook/recipe.resolved.json"] = json.dumps(p.resolved.data, indent=2, sort_keys=True, default=str) + "\n"
    p.files["launch.sh"] = launch_block(p.resolved)  # what `cookbook launch` prints, byte for byte
    if p.port.wheels:
        wheels = root / WHEELS
        found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
        engine = recipe.image.engine
        want = f"{engine.package.replace('-', '_')}-{engine.version}-"
        if not any(w.name.startswith(want) for w in found):
            p.missing_wheels = CookbookError(
                f"the wheel set {WHEELS}/ has no {engine.package} {engine.version} wheel; the image builds offline from it",
                help="fill it: scripts/fetch-wheels (pip download of the engine, torch and the cookbook's dependencies)",
            )
        for w in found:
            p.files[f"wheels/{w.name}"] = w
    for inp in p.port.inputs:
        _context_path(f"inputs/{inp.name}")
        src = root / ports.INPUTS_DIR / inp.name
        needed = not inp.platforms or recipe.hardware.platform in inp.platforms
        if src.is_dir() and any(src.iterdir()):
            for f in _tree(src, "."):
                p.files[f"inputs/{inp.name}/{f.removeprefix('./')}"] = src / f
        else:
            p.files[f"inputs/{inp.name}/MISSING"] = inp.missing_message(p.port.family) if needed else ""
            if needed:
                p.missing_inputs.append(inp)


def write(p: Plan, dest: Path) -> Path:
    """The context folder, all at once (atomic_dir). The repository's files are copied; wheels and
    build inputs (large, never edited) are hard links where they can be."""
    with atomic_dir(dest, force=True) as tmp:
        for rel, src in p.files.items():
            out = tmp / _context_path(rel)
            out.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(src, str):
                out.write_text(src, encoding="utf-8")
                continue
            _copy_regular(src, out, link=rel.startswith(("wheels/", "inputs/")))
    return dest


def _context_path(rel: str) -> str:
    """`rel` only if it stays inside the context folder: no absolute path, no `..` (a name from a
    recipe or port.yaml, a kernel's or a build input's, is never a way out of the context)."""
    parts = rel.split("/")
    if rel.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise CookbookError(
            f"{printable(rel[:200])}: not a path inside the image's context; refused",
            help="a kernel or build input name is a plain folder name (kernels/<name>/, .cache/image-inputs/<name>/)",
        )
    return rel


def _copy_regular(src: Path, out: Path, link: bool) -> None:
    """Copy (or hard-link) src only if it is still a regular file: opened without following a link,
    so a file swapped for a link after the plan was made is refused, not followed."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            _refuse_special(src, os.lstat(src))
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _refuse_special(src, st)
        if link:
            try:
                os.link(src, out, follow_symlinks=False)
                return
            except OSError:
                pass
        os.set_blocking(fd, True)
        with open(fd, "rb", closefd=False) as f, open(out, "wb") as g:
            shutil.copyfileobj(f, g, 1 << 20)
        os.chmod(out, stat.S_IMODE(st.st_mode))
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
    finally:
        os.close(fd)
