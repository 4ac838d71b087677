"""The base image of each platform: docker/<folder>/base.yaml names the image, how it is pinned
(digest, tag or build input) and why, and how to get it.

    python -m cookbook.image.bases cpu    # TAG, SUITE, PACKAGES for scripts/make-cpu-base
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from cookbook.errors import CookbookError
from cookbook.files import repo_root

PIN_KINDS = ("digest", "tag", "build-input")


@dataclass(frozen=True)
class Base:
    folder: str  # docker/<folder>/
    platforms: tuple[str, ...]
    image: str | None  # None: a build input (--base)
    pin: str
    why: str
    get: str
    make: dict

    @property
    def path(self) -> str:
        return f"docker/{self.folder}/base.yaml"


def _load(path: Path) -> Base:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CookbookError(f"cannot read {path}: {exc}", help="fix the base definition") from None
    if not isinstance(data, dict) or data.get("pin") not in PIN_KINDS or not data.get("platforms"):
        raise CookbookError(
            f"{path}: a base definition needs platforms, image, pin ({', '.join(PIN_KINDS)}), why and get",
            help="see docker/cpu/base.yaml",
        )
    image = data.get("image")
    if data["pin"] == "digest" and (not image or "@sha256:" not in image):
        raise CookbookError(f"{path}: pin is digest but image has no @sha256:", help="name the image by digest")
    return Base(
        folder=path.parent.name,
        platforms=tuple(data["platforms"]),
        image=image,
        pin=data["pin"],
        why=" ".join(str(data.get("why", "")).split()),
        get=" ".join(str(data.get("get", "")).split()),
        make=data.get("make") or {},
    )


def all_bases(root: Path | None = None) -> list[Base]:
    root = root or repo_root()
    return [_load(p) for p in sorted((root / "docker").glob("*/base.yaml"))]


def for_platform(platform: str, root: Path | None = None) -> Base:
    for base in all_bases(root):
        if platform in base.platforms:
            return base
    raise CookbookError(
        f"no base image for platform {platform!r} under docker/",
        help="add it to the platforms of a docker/<folder>/base.yaml",
    )


def _shell_vars(folder: str) -> str:
    base = next((b for b in all_bases() if b.folder == folder), None)
    if base is None or not base.make:
        raise CookbookError(f"docker/{folder}/base.yaml has no make: section", help="only docker/cpu/ is made here")
    return "\n".join(
        f"{k}={shlex.quote(v)}"
        for k, v in (
            ("TAG", base.image or ""),
            ("SUITE", str(base.make["suite"])),
            ("PACKAGES", ",".join(base.make["packages"])),
        )
    )


if __name__ == "__main__":
    try:
        print(_shell_vars(sys.argv[1] if len(sys.argv) > 1 else "cpu"))
    except CookbookError as exc:
        print(exc.render(), file=sys.stderr)
        sys.exit(exc.exit_code)
