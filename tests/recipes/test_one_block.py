"""One launch block per recipe and quant: the launch.sh the image carries, the block `cookbook serve`
runs (its --dry-run) and what `cookbook launch` prints are the same bytes, for every recipe and
every quant it offers (a quant the recipe refuses on its GPU count is refused by all three)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.errors import CookbookError
from cookbook.image import context
from cookbook.recipe.errors import RecipeError
from cookbook.recipe.resolve import all_slugs, resolve


def _cases():
    out = []
    for slug in all_slugs():
        r = resolve(slug, check=False)
        if r.recipe.abstract:
            continue
        out += [(slug, None)] + [(slug, q) for q in r.recipe.quants]
    return out


CASES = _cases()


def _cli(*argv: str):
    return CliRunner().invoke(main, list(argv))


def test_every_recipe_and_quant_is_covered():
    slugs = {s for s, _ in CASES}
    assert {"gemma3-270m-cpu", "glm52-2", "glm52-mxfp4-8x-gaudi2", "k3-6"} <= slugs
    assert ("glm52-4", "Q4_K") in CASES
    planned = [s for s, q in CASES if "--kv-cache-memory-bytes" in _cli("launch", s).output]
    assert {"glm52-2", "glm52-4", "glm52-8"} <= set(planned)


@pytest.mark.parametrize("slug,quant", CASES, ids=[f"{s}-{q or 'default'}" for s, q in CASES])
def test_image_serve_and_launch_run_the_same_block(slug, quant):
    q = ["--quant", quant] if quant else []
    launched = _cli("launch", slug, *q)
    served = _cli("serve", slug, *q, "--dry-run")
    try:
        resolved = resolve(slug, quant)
    except RecipeError:
        # refused (e.g. a quant needing more GPUs than the recipe has): refused everywhere, exit 2
        assert launched.exit_code == served.exit_code == 2, (launched.output, served.output)
        return
    assert launched.exit_code == 0 and served.exit_code == 0, (launched.output, served.output)
    assert launched.output == served.output
    as_json = json.loads(_cli("launch", slug, *q, "--json").output)
    assert as_json["block"] == launched.output and as_json["content_hash"] == resolved.content_hash
    try:
        context.plan(resolved)
    except CookbookError as exc:  # no port builds this recipe's engine yet: no image to compare
        assert "no port builds" in exc.message
        return
    image = _cli("image", slug, *q, "--dry-run", "--json")
    assert image.exit_code == 0, image.output
    image_sh = json.loads(image.output)["launch_sh"]
    assert image_sh == launched.output
    assert launched.output.rstrip("\n") in _cli("image", slug, *q, "--dry-run").output  # the text dry run shows it
    r = resolved.recipe
    if r.plan and r.plan.explicit_kv_bytes and r.serve.arg("kv_cache_memory_bytes") is None:
        # the glm52 family sizes its pool explicitly (vLLM's auto-sizer OOMs there): all three carry it
        assert "\n  --kv-cache-memory-bytes " in image_sh and "left after weights" in image_sh
    else:
        assert "from the memory plan" not in image_sh


def test_the_cpu_default_block_has_no_plan_flags():
    """`make run`'s recipe: the plan adds nothing to its block (its pool is VLLM_CPU_KVCACHE_SPACE)."""
    text = _cli("launch", "gemma3-270m-cpu").output
    assert "--kv-cache-memory-bytes" not in text and "memory plan" not in text
