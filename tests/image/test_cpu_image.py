"""The built image of this host's CPU recipe (`make image RECIPE=gemma3-270m-cpu`, -avx2 on AVX2):
its labels are the plan's, its launch block is the one `cookbook launch` prints, it proves its own fix pack, and without a
checkpoint its entrypoint refuses with one message. Needs the daemon and the image (.ci/run
builds it before the tests); each test skips, saying so, without them."""

import pytest

from cookbook import host_cpu
from cookbook.image import build, context
from cookbook.plan.launch_block import launch_block
from cookbook.recipe.resolve import resolve

pytestmark = [pytest.mark.docker, pytest.mark.slow_tier("image")]
# the host's float CPU recipe, the one scripts/slow-tier builds the image of (host_cpu.cpu_recipe)
SLUG = host_cpu.cpu_recipe()


@pytest.fixture(scope="module")
def built():
    plan = context.plan(resolve(SLUG))
    c = build.client()
    img = build.image_of(c, plan.tag)
    if img is None:
        pytest.skip(f"{plan.tag} is not built here: make image RECIPE={SLUG}")
    return c, plan, img


def run(c, tag, *argv, **kw) -> tuple[int, str]:
    box = c.containers.run(tag, list(argv), detach=True, **kw)
    try:
        code = box.wait(timeout=300)["StatusCode"]
        return code, box.logs().decode("utf-8", "replace")
    finally:
        box.remove(force=True)


def test_labels_are_the_plans(built):
    _, plan, img = built
    labels = img.labels
    for key in ("io.cookbook.recipe-hash", "io.cookbook.fix-set-hash", "io.cookbook.engine-pin"):
        assert labels[key] == plan.labels[key], key
    assert labels["io.cookbook.recipe-hash"] == resolve(SLUG).content_hash
    assert labels["org.opencontainers.image.revision"] and labels["org.opencontainers.image.source"]


def test_the_image_holds_the_launch_block_cookbook_launch_prints(built):
    c, plan, _ = built
    code, out = run(c, plan.tag, "cat", "/opt/cookbook/launch.sh")
    assert code == 0 and out == launch_block(resolve(SLUG))


def test_the_image_proves_its_fix_pack(built):
    c, plan, _ = built
    code, out = run(c, plan.tag, "cookbook", "fixes", "check", "--profile", "vllm-cpu-0.32.0")
    assert code == 0, out
    assert f"fix set hash: {plan.labels['io.cookbook.fix-set-hash']}" in out


def test_without_a_checkpoint_the_entrypoint_refuses(built):
    c, plan, _ = built
    box = c.containers.run(plan.tag, detach=True)
    try:
        code = box.wait(timeout=120)["StatusCode"]
        out = box.logs().decode()
    finally:
        box.remove(force=True)
    assert code == 2
    assert out.startswith("error: no checkpoint at /models/checkpoint (config.json missing)")
    assert "help: mount the converted checkpoint: -v /path/to/checkpoint:/models/checkpoint:ro" in out
