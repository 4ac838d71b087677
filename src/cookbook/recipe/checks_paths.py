"""Lint checks that a recipe names only things that exist and fit: its kernels (a backend for its
platform, R016/R017) and the Dockerfile and port paths it points at (R018/R019)."""

from __future__ import annotations

from pathlib import Path

from cookbook import platforms
from cookbook.recipe import errors as E
from cookbook.recipe.paths import repo_root


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
    if img.dockerfile and not (root / img.dockerfile).is_file():
        out.append(
            diag(
                E.MISSING_PATH,
                "image.dockerfile",
                f"{img.dockerfile} is not a file of this repository",
                "a Dockerfile of the engine's own repository goes under image.engine.dockerfile; "
                "leave out one that is not written yet",
            )
        )
    if img.port and not (root / "ports" / img.port).is_dir():
        out.append(
            diag(
                E.MISSING_PATH,
                "image.port",
                f"ports/{img.port}/ is not in this repository",
                "name a folder under ports/, or leave image.port out",
            )
        )
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
