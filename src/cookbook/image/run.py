"""The `docker run` line of a recipe's image: the model folder mounted where the image's block reads it,
the recipe's port, the accelerators of its platform and a compile cache. `cookbook image --dry-run`
prints it beside the build line, the recipe page under "Build or get the image", and `cookbook serve
--image` runs the same mounts (cookbook.serving.container)."""

from __future__ import annotations

import shlex

from cookbook import platforms
from cookbook.model_folder import VARIABLE
from cookbook.recipe import shell
from cookbook.recipe.resolve import ResolvedRecipe

CHECKPOINT_IN_IMAGE = "/models/checkpoint"  # the ports' Dockerfiles: ENV CHECKPOINT_DIR (the VOLUME /models)
CACHE_IN_IMAGE = "/cache"  # the ports' Dockerfiles: VLLM_CACHE_ROOT under the VOLUME /cache
# vLLM's engine core and API server share a 160 MiB+ buffer in /dev/shm (Docker's default is 64 MiB).
SHM_SIZE = "2g"
# Per vendor, what hands the container the platform's accelerators.
DEVICES = {
    "nvidia": ["--gpus", "all"],
    "amd": ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video"],
    "intel": ["--runtime", "habana", "-e", "HABANA_VISIBLE_DEVICES=all", "--cap-add", "sys_nice"],
    "cpu": [],
}


def model_mount(resolved: ResolvedRecipe) -> tuple[str, str] | None:
    """(host folder, folder in the container) of the recipe's model folder; None when it names none.

    `${CHECKPOINT_DIR:-default}`: the image sets CHECKPOINT_DIR to CHECKPOINT_IN_IMAGE, so the host's
    folder (the user's CHECKPOINT_DIR, else the fetch folder, made absolute) is mounted there. A fixed
    value (the Gaudi recipe's /models/...-fused) is the same path on both sides."""
    setting = resolved.recipe.env.get(VARIABLE)
    if setting is None or not isinstance(setting.value, str):
        return None
    text = setting.value
    prefix = f"${{{VARIABLE}:-"
    if text.startswith(prefix) and text.endswith("}"):
        default = text[len(prefix) : -1]
        host = default if default.startswith(("/", "$")) else f"$PWD/{default}"
        return f"${{{VARIABLE}:-{host}}}", CHECKPOINT_IN_IMAGE
    return text, text


def run_command(resolved: ResolvedRecipe, tag: str) -> str:
    """The `docker run` line, one option a line; host-side references stay for bash to expand."""
    r = resolved.recipe
    vendor = getattr(platforms.get(r.hardware.platform), "vendor", "cpu")
    host = r.serve.arg("host", "127.0.0.1")
    port = r.serve.arg("port", 8000)
    opts: list[list[str]] = [["--rm"]]
    if host in ("0.0.0.0", "::"):
        opts.append(["-p", f"{port}:{port}"])
    else:  # the block listens on the loopback: only the host's own network reaches it
        opts.append(["--network", "host"])
    devices = DEVICES.get(vendor, [])
    if devices:
        opts += [devices[i : i + 2] for i in range(0, len(devices), 2)]
        opts.append(["--ipc", "host"])  # NCCL and vLLM's workers share memory across processes
    else:
        opts.append(["--shm-size", SHM_SIZE])
    mount = model_mount(resolved)
    if mount is not None:
        opts.append(["-v", f"{mount[0]}:{mount[1]}:ro"])
    opts.append(["-v", f"cookbook-cache:{CACHE_IN_IMAGE}"])
    lines = ["docker run"] + [" ".join(shell.quote_arg(t) if "$" in t else shlex.quote(t) for t in o) for o in opts]
    lines.append(shlex.quote(tag))
    return " \\\n  ".join(lines)
