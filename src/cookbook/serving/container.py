"""Run a recipe's image as its server: the container starts the launch block baked into the
image (the one `cookbook launch` prints), shares the host's network (the block listens where
the recipe says), and mounts the converted checkpoint and a compile cache as volumes. The
same interface as cookbook.serving.local.Server, so `cookbook serve` waits, gates and stops
either one."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cookbook.image.run import CACHE_IN_IMAGE, CHECKPOINT_IN_IMAGE, SHM_SIZE
from cookbook.serving.local import ServeError, _exit_on_sigterm, _get, step


@dataclass
class ContainerServer:
    container: Any  # docker.models.containers.Container
    log: Path
    base_url: str
    image: dict[str, str]  # ref, id, digest

    def __post_init__(self) -> None:
        # as for a local server: a SIGTERM to the caller must still run its `finally: stop()`, or
        # the container keeps the port and the next launch is refused
        _exit_on_sigterm()

    def alive(self) -> bool:
        try:
            self.container.reload()
        except Exception:  # removed: not alive
            return False
        return self.container.status in ("created", "running")

    def exit_status(self) -> int | None:
        try:
            return self.container.attrs.get("State", {}).get("ExitCode")
        except Exception:
            return None

    def tail(self, lines: int = 30) -> str:
        try:
            return self.container.logs(tail=lines).decode("utf-8", "replace").rstrip("\n")
        except Exception:
            return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, grace_s: float = 30.0) -> None:
        step(f"stopping the container {self.container.name}")
        try:
            self.container.stop(timeout=int(grace_s))
            self.log.write_bytes(self.container.logs())
            self.container.remove(force=True)
        except Exception as exc:  # already gone
            step(f"container {self.container.name}: {type(exc).__name__}")


def launch(resolved, checkpoint: Path, cache: Path, workdir: Path, port: int | None = None) -> ContainerServer:
    """port: serve on this port instead of the recipe's (the image's entrypoint renders the block
    with --set port=N); None runs the block baked into the image as it is."""
    from cookbook.image import build

    tag = f"cookbook/{resolved.slug}:{resolved.content_hash.split(':', 1)[1][:12]}"
    c = build.client()
    if build.image_of(c, tag) is None:
        raise ServeError(
            f"no image {tag} in the local Docker daemon (the image of this recipe as it is now)",
            help=f"build it: make image RECIPE={resolved.slug}",
            exit_code=2,
        )
    image = build.identity(tag)
    serve = resolved.recipe.serve
    host = serve.arg("host", "127.0.0.1")
    port = port or serve.arg("port", 8000)
    base_url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    if _get(base_url + "/health", 2) is not None:
        raise ServeError(f"something already answers on {base_url}", help="stop it, or serve on another: --port N")
    cache.mkdir(parents=True, exist_ok=True)
    name = f"cookbook-{resolved.slug}-{int(time.time())}"
    from docker.errors import APIError

    step(
        f"docker run --network host --shm-size {SHM_SIZE} "
        f"-v {checkpoint}:{CHECKPOINT_IN_IMAGE}:ro -v {cache}:{CACHE_IN_IMAGE} "
        f"{tag}  ({image['id'][:19]}, container {name})"
    )
    container = c.containers.create(
        tag,
        name=name,
        network_mode="host",
        shm_size=SHM_SIZE,
        volumes={
            str(checkpoint.resolve()): {"bind": CHECKPOINT_IN_IMAGE, "mode": "ro"},
            str(cache.resolve()): {"bind": CACHE_IN_IMAGE, "mode": "rw"},
        },
        labels={"io.cookbook.serve": resolved.slug},
        environment={"COOKBOOK_PORT": str(port)} if port != serve.arg("port", 8000) else {},
    )
    try:
        container.start()
    except APIError as exc:
        container.remove(force=True)
        raise ServeError(f"the container of {tag} did not start: {exc.explanation or exc}") from None
    return ContainerServer(container, workdir / "server.log", base_url, image)


def check_answering(server: ContainerServer) -> None:
    """The server that answered is the container's: vLLM's /v1/models names the model path it
    serves as root, and only the container serves CHECKPOINT_IN_IMAGE. (With the host's network,
    another server that took the port first would otherwise be gated in its place.)"""
    import json

    body = _get(server.base_url + "/v1/models", 5)
    roots = [m.get("root") for m in json.loads(body).get("data", [])] if body else []
    if not server.alive() or CHECKPOINT_IN_IMAGE not in roots:
        raise ServeError(
            f"the server at {server.base_url} is not the container's (it serves {roots or 'nothing'}, "
            f"not {CHECKPOINT_IN_IMAGE}); last lines of the container:\n{server.tail()}",
            help="another server holds that port: serve on a free one with --port N",
        )
