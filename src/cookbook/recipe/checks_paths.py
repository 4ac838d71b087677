"""Lint checks that a recipe names only things that exist and fit: its kernels (a backend for its
platform, R016/R017) and the Dockerfile and port paths it points at (R018/R019)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cookbook import platforms
from cookbook.recipe import errors as E
from cookbook.recipe.paths import repo_root
from cookbook.untrusted import file_kind, inside, is_plain_name, printable

PORT_HELP = "name a folder under ports/, or leave image.port out"


def dockerfile_problem(root: Path, rel: str) -> str | None:
    """Why image.dockerfile cannot be used (None when it is a regular file inside the checkout, links
    resolved). `cookbook image` refuses with the same words."""
    try:
        full = inside(root, rel)
    except ValueError as e:
        return str(e)
    try:
        st = os.stat(full)
    except OSError:
        return "is not a file of this repository"
    if not stat.S_ISREG(st.st_mode):
        return f"is a {file_kind(st.st_mode)}, not a regular file"
    return None


def port_problem(root: Path, name: str) -> str | None:
    """Why image.port cannot be used (None when ports/<name>/ is a folder inside ports/)."""
    if not is_plain_name(name):
        return "is not a plain folder name under ports/"
    try:
        full = inside(root / "ports", name)
    except ValueError as e:
        return str(e)
    return None if full.is_dir() else "is not in this repository"


def check(recipe, diag, root: Path | None = None) -> list[E.Diagnostic]:
    root = root or repo_root()
    return _kernels(recipe, diag, root) + _paths(recipe, diag, root)


def _kernels(recipe, diag, root: Path) -> list[E.Diagnostic]:
    from cookbook import kernel_catalogue as catalogue

    out = []
    platform = recipe.hardware.platform
    for i, ref in enumerate(recipe.image.kernels):
        kernel = catalogue.get(ref.name)
        if kernel is None or not (root / "kernels" / ref.name).is_dir():
            out.append(
                diag(
                    E.UNKNOWN_KERNEL,
                    f"image.kernels.{i}.name",
                    f"no kernel {ref.name!r} in kernels/",
                    f"kernels: {', '.join(catalogue.KERNELS)}",
                )
            )
            continue
        if ref.variant not in kernel.variants:
            out.append(
                diag(
                    E.UNKNOWN_KERNEL,
                    f"image.kernels.{i}.variant",
                    f"{ref.name} has no variant {ref.variant!r}",
                    f"variants: {', '.join(kernel.variants)}",
                )
            )
        if platforms.get(platform) and kernel.backend_for(platform) is None:  # unknown platform: R013
            has = "; ".join(f"{b.id} on {', '.join(kernel.platforms_of(b))}" for b in kernel.backends)
            out.append(
                diag(
                    E.KERNEL_NO_BACKEND,
                    f"image.kernels.{i}",
                    f"{ref.name} has no backend for platform {platform!r}",
                    f"{ref.name}'s backends: {has}; drop the entry or use a recipe on one of those",
                )
            )
    return out


def _paths(recipe, diag, root: Path) -> list[E.Diagnostic]:
    out = []
    img = recipe.image
    if img.dockerfile:
        why = dockerfile_problem(root, img.dockerfile)
        if why:
            out.append(
                diag(
                    E.MISSING_PATH,
                    "image.dockerfile",
                    f"{printable(img.dockerfile[:200])} {why}",
                    "a Dockerfile of the engine's own repository goes under image.engine.dockerfile; "
                    "leave out one that is not written yet",
                )
            )
    if img.port:
        why = port_problem(root, img.port)
        if why:
            out.append(diag(E.MISSING_PATH, "image.port", f"ports/{printable(img.port[:200])}/ {why}", PORT_HELP))
    if img.engine.dockerfile and not img.engine.repo:
        out.append(
            diag(
                E.ENGINE_DOCKERFILE_NO_REPO,
                "image.engine.dockerfile",
                f"{img.engine.dockerfile} is a file of the engine's repository, but image.engine.repo is not set",
                "set image.engine.repo to the repository that holds it",
            )
        )
    return out
