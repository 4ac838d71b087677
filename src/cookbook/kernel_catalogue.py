"""The kernels a recipe may name under `image.kernels`, and their backend per platform.

A kernel is one folder under kernels/ (its build.sh, README) with one backend per platform
arch (`platforms.Platform.arch`): the recipe's `hardware.platform` picks the backend, never the
recipe itself, so a recipe cannot ask for the NVIDIA build on a Gaudi node. A backend that is
not in this repository says what is missing and where it would go; its build step stops with
that message instead of building another backend. Imports nothing heavy (lint reads it).
"""

from __future__ import annotations

from dataclasses import dataclass

from cookbook import platforms


@dataclass(frozen=True)
class Backend:
    id: str  # build.sh --backend ID
    archs: tuple[str, ...]  # platform arches it runs on
    what: str  # what it is, in a few words
    missing: str | None = None  # None: built from this repository; else what is missing and where it would go
    enable_env: str | None = None  # the variable a launch exports =1 to switch the backend on in the engine


@dataclass(frozen=True)
class Kernel:
    name: str  # the folder kernels/<name>/
    variants: tuple[str, ...]
    backends: tuple[Backend, ...]

    def backend_for(self, platform_id: str) -> Backend | None:
        plat = platforms.get(platform_id)
        return next((b for b in self.backends if plat and plat.arch in b.archs), None)

    def backend(self, backend_id: str) -> Backend | None:
        return next((b for b in self.backends if b.id == backend_id), None)

    def platforms_of(self, backend: Backend) -> list[str]:
        return [p.id for p in platforms.CATALOGUE.values() if p.arch in backend.archs]

    def build_command(self, variant: str, backend: Backend) -> str:
        return f"kernels/{self.name}/build.sh --backend {backend.id} --variant {variant}"

    def launch_lines(self, variant: str, backend: Backend) -> list[str]:
        """What a launch block runs for a backend built here: its build step (which checks the tuned
        table, and stops the block if it cannot), then the switch the engine's plugin reads (a caller's
        own value wins, so `NAME=0` runs the same block with the kernel off)."""
        if backend.missing:
            return []  # the image provides it; nothing of this repository runs
        lines = [f'"${{COOKBOOK:-.}}"/{self.build_command(variant, backend)} >/dev/null || exit 1']
        if backend.enable_env:
            lines.append(f'export {backend.enable_env}="${{{backend.enable_env}:-1}}"')
        return lines


MXFP4_MOE = Kernel(
    name="mxfp4-moe",
    variants=("dsv4", "glm", "k3"),  # cookbook.kernels.mxfp4_moe.shapes.VARIANTS (a test checks)
    backends=(
        Backend(
            "sm90",
            ("sm90",),
            "fused Triton/Gluon kernels for NVIDIA Hopper (cookbook.kernels.mxfp4_moe)",
            enable_env="COOKBOOK_MXFP4_MOE",  # read by the vLLM plugin, cookbook.vllm_plugin
        ),
        Backend(
            "hpu",
            ("hpu",),
            "MXFP4 MoE kernels for Intel Gaudi",
            missing="the HPU kernels that GLM_MXK=1 runs come with the glm-5-mxfp4 port image; "
            "they would go in kernels/mxfp4-moe/hpu/, built by `build.sh --backend hpu`",
        ),
    ),
)

KERNELS: dict[str, Kernel] = {k.name: k for k in (MXFP4_MOE,)}


def get(name: str) -> Kernel | None:
    return KERNELS.get(name)
