"""recipes/<slug>/offline.lock: what `cookbook offline pack` carries, pinned, so that a later pack
gives the same wheels.

It is a pip requirements file in hash-checking mode, one line a distribution, nothing else:

    vllm==0.26.0 --hash=sha256:<64 hex>          # the engine (the first line)
    loguru==0.7.3 --hash=sha256:<64 hex>

so pip itself refuses any file whose sha256 differs (`pip download --require-hashes`). A line can
hold only a name, a version and hashes: no path, URL or `name @ file://...` of one machine can be
written or read (parse refuses them). `cookbook offline lock SLUG` writes it from pip's resolver
report (`pip install --dry-run --report`: each file's sha256 from the index, no wheel downloaded);
`cookbook offline pack SLUG` reads it when it is there and resolves nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cookbook.errors import BAD_INPUT, CookbookError

LOCK_NAME = "offline.lock"
_LINE = re.compile(
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9][A-Za-z0-9.+!_-]*)"
    r"(?P<hashes>(?:\s+--hash=sha256:[0-9a-f]{64})+)\s*(?:#.*)?"
)


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    sha256: tuple[str, ...]

    def line(self) -> str:
        return f"{self.name}=={self.version} " + " ".join(f"--hash=sha256:{h}" for h in self.sha256)


@dataclass(frozen=True)
class Lock:
    engine: Pin
    wheels: tuple[Pin, ...]

    def text(self, slug: str) -> str:
        head = (
            f"# cookbook offline lock for {slug}: what `cookbook offline pack {slug}` carries, each file's sha256\n"
            f"# from the index. Rewrite with `cookbook offline lock {slug}`; never edit by hand.\n"
        )
        body = [f"{self.engine.line()}  # engine"] + [
            p.line() for p in sorted(self.wheels, key=lambda p: p.name.lower())
        ]
        return head + "\n".join(body) + "\n"


def parse(text: str, where: Path | str) -> Lock:
    pins = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.fullmatch(line)
        if m is None:
            raise CookbookError(
                f"{where}:{n}: not `NAME==VERSION --hash=sha256:HEX` (a lock names no path or URL)",
                help="rewrite the lock with `cookbook offline lock SLUG`",
                exit_code=BAD_INPUT,
            )
        pins.append(Pin(m["name"], m["version"], tuple(re.findall(r"[0-9a-f]{64}", m["hashes"]))))
    if not pins:
        raise CookbookError(f"{where}: holds no pin", help="rewrite it with `cookbook offline lock SLUG`")
    names = [p.name.lower() for p in pins]
    if len(set(names)) != len(names):
        raise CookbookError(f"{where}: names a distribution twice", help="rewrite it with `cookbook offline lock SLUG`")
    return Lock(engine=pins[0], wheels=tuple(pins[1:]))


def load(recipe_dir: Path) -> Lock | None:
    path = recipe_dir / LOCK_NAME
    if not path.is_file():
        return None
    return parse(path.read_text(encoding="utf-8"), path)


def requirements_file(pins, path: Path) -> Path:
    """A requirements file pip reads in hash-checking mode (--require-hashes)."""
    path.write_text("".join(p.line() + "\n" for p in pins), encoding="utf-8")
    return path
