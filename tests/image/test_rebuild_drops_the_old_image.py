"""A rebuild under the same tag removes the image it replaced (it would stay as a dangling image of
several GiB), unless a container still uses it. Builds two one-file images FROM scratch through
`build.build` on the real daemon, under the CPU recipe's plan with a test tag."""

import dataclasses
import uuid

import pytest

from cookbook.image import build, context
from cookbook.recipe.resolve import resolve

pytestmark = [pytest.mark.docker, pytest.mark.slow_tier("image")]


@pytest.fixture
def daemon():
    try:
        return build.client()
    except Exception as exc:  # noqa: BLE001 - any refusal means no daemon here
        pytest.skip(f"no Docker daemon: {exc}")


@pytest.fixture
def plan(daemon):
    tag = f"cookbook-test/rebuild:{uuid.uuid4().hex[:12]}"
    yield dataclasses.replace(context.plan(resolve("gemma3-270m-cpu")), tag=tag, buildargs={}, labels={})
    for img in daemon.images.list(filters={"label": "io.cookbook.test=rebuild"}):
        daemon.images.remove(img.id, force=True)


def build_with(daemon, plan, tmp_path, text: str) -> str:
    ctx = tmp_path / text
    ctx.mkdir()
    (ctx / "marker").write_text(text)
    (ctx / "Dockerfile").write_text("FROM scratch\nLABEL io.cookbook.test=rebuild\nCOPY marker /marker\n")
    return build.build(daemon, plan, ctx)["id"]


def test_a_rebuild_removes_the_image_it_replaced(daemon, plan, tmp_path, capsys):
    first = build_with(daemon, plan, tmp_path, "one")
    second = build_with(daemon, plan, tmp_path, "two")
    assert first != second
    assert build.image_of(daemon, second) is not None
    assert build.image_of(daemon, first) is None
    assert f"removed the previous build {first}" in capsys.readouterr().err


def test_a_rebuild_keeps_the_old_image_a_container_uses(daemon, plan, tmp_path, capsys):
    first = build_with(daemon, plan, tmp_path, "one")
    box = daemon.containers.create(first, ["/marker"])
    try:
        build_with(daemon, plan, tmp_path, "two")
        assert build.image_of(daemon, first) is not None
        assert f"kept the previous build {first}" in capsys.readouterr().err
    finally:
        box.remove(force=True)


def test_an_unchanged_rebuild_keeps_its_image(daemon, plan, tmp_path):
    first = build_with(daemon, plan, tmp_path, "one")
    (tmp_path / "one").rename(tmp_path / "again")
    assert build_with(daemon, plan, tmp_path, "one") == first
    assert build.image_of(daemon, first) is not None
