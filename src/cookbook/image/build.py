"""Build a planned image through the Docker SDK (the `docker` package): check the daemon and
the base, send the context, stream the build's progress, tag and label the image."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from cookbook.errors import FAILED, CookbookError
from cookbook.image.context import Plan

START_DAEMON = (
    "start one: `dockerd >/var/log/dockerd.log 2>&1 &` as root (apt-get install docker.io), or systemctl start docker"
)


def client():
    """A client whose daemon answers, or the refusal that says how to start one."""
    from docker.errors import DockerException

    import docker

    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        c = docker.from_env(timeout=600)
        c.ping()
    except DockerException as exc:
        raise CookbookError(
            f"no Docker daemon answers at {where} ({type(exc).__name__})",
            help=f"{START_DAEMON}; `cookbook image SLUG --dry-run` needs no daemon",
        ) from None
    return c


def image_of(c, ref: str):
    from docker.errors import ImageNotFound

    try:
        return c.images.get(ref)
    except ImageNotFound:
        return None


def require_named_base(p: Plan) -> None:
    """A base that is a build input must be named (--base) before a daemon is asked anything."""
    if not p.base:
        raise CookbookError(
            f"{p.slug} has no base image to build on: {p.base_def.why}",
            help=f"{p.base_def.get} (docker/{p.base_def.folder}/base.yaml)",
        )


def require_base(c, p: Plan) -> None:
    require_named_base(p)
    if image_of(c, p.base) is None:
        raise CookbookError(
            f"base image {p.base} is not in the local Docker daemon (docker/{p.base_def.folder}/base.yaml)",
            help=f"get or build it: {p.base_def.get}; or name another with --base IMAGE",
        )


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def build(c, p: Plan, context_dir: Path) -> dict:
    """Stream the build; return {'id', 'tag', 'seconds', 'size'}. A failed step is exit 1 with its output."""
    from docker.errors import APIError, BuildError

    t0 = time.monotonic()
    before = image_of(c, p.tag)
    _say(f"==> docker build {p.tag} from {context_dir} (base {p.base})")
    last: list[str] = []
    image_id = None
    try:
        for chunk in c.api.build(
            path=str(context_dir),
            tag=p.tag,
            buildargs=p.buildargs,
            labels=p.labels,
            rm=True,
            forcerm=True,
            pull=False,
            decode=True,
        ):
            if "stream" in chunk:
                text = chunk["stream"].rstrip("\n")
                if text:
                    _say(text)
                    last = (last + text.splitlines())[-40:]
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
            if "error" in chunk:
                raise CookbookError(
                    f"the build of {p.tag} failed: {chunk['error'].strip()}",
                    help="the step's output is above; a missing build input says where it goes",
                    exit_code=FAILED,
                )
    except (APIError, BuildError) as exc:
        raise CookbookError(f"the build of {p.tag} failed: {exc}", exit_code=FAILED) from None
    img = c.images.get(p.tag)
    seconds = time.monotonic() - t0
    size = img.attrs.get("Size", 0)
    _say(f"==> built {p.tag} ({img.id}, {size / 2**30:.2f} GiB) in {seconds:.0f} s")
    if before is not None and before.id != img.id:
        drop_if_untagged(c, before.id)
    return {"id": image_id or img.id, "tag": p.tag, "seconds": round(seconds, 1), "size": size}


def drop_if_untagged(c, image_id: str) -> None:
    """A rebuild moves the tag to the new image; the one it replaced, left with no tag, would stay
    on disk as a dangling image of several GiB that nothing names. Remove it unless a container
    still uses it (then keep it and say so) or another tag still names it."""
    from docker.errors import APIError

    old = image_of(c, image_id)
    if old is None or old.tags:
        return
    try:
        c.images.remove(image_id)
    except APIError as exc:
        _say(f"==> kept the previous build {image_id}: {exc.explanation or exc}")
        return
    _say(f"==> removed the previous build {image_id} (its tag now names the new one)")


def identity(ref: str) -> dict:
    """The image's ID (the sha256 of its config, what the daemon names it by) and digest (its
    registry manifest digest when it was pushed or pulled; else the ID, as no registry is here)."""
    c = client()
    img = image_of(c, ref)
    if img is None:
        raise CookbookError(
            f"image {ref} is not in the local Docker daemon",
            help=f"build it: cookbook image SLUG (or docker pull {ref})",
        )
    repo_digests = img.attrs.get("RepoDigests") or []
    digest = repo_digests[0].split("@", 1)[1] if repo_digests else img.id
    return {"ref": ref, "id": img.id, "digest": digest}
