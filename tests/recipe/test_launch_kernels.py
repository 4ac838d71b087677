"""The recipe-to-kernel link: a recipe naming `kernels: mxfp4-moe` on an sm90 platform gets the
kernel's build step (build.sh, which checks the tuned table) and its switch in its launch block;
the lines run for real in bash here (build.sh needs no GPU to check a table)."""

import json
import os
import subprocess

import pytest

from cookbook.files import repo_root
from cookbook.plan.launch_block import launch_block
from cookbook.recipe import resolve
from cookbook.recipe.launch import kernel_lines

ROOT = repo_root()


def _run(lines, **env):
    script = "\n".join([*lines, 'printf "%s" "${COOKBOOK_MXFP4_MOE:-unset}"'])
    base = {k: v for k, v in os.environ.items() if not k.startswith("COOKBOOK_MXFP4_MOE")}
    return subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env={**base, "COOKBOOK": str(ROOT), **env}, capture_output=True, text=True
    )


def test_an_sm90_recipe_gets_the_build_step_and_the_switch():
    lines = kernel_lines(resolve("dsv4-flash-perf-h200"))
    assert lines == [
        '"${COOKBOOK:-.}"/kernels/mxfp4-moe/build.sh --backend sm90 --variant dsv4 >/dev/null || exit 1',
        'export COOKBOOK_MXFP4_MOE="${COOKBOOK_MXFP4_MOE:-1}"',
    ]
    block = launch_block(resolve("dsv4-flash-perf-h200"))
    assert block.index(lines[1]) < block.index("vllm serve")


def test_the_lines_check_the_table_and_switch_the_plugin_on():
    res = _run(kernel_lines(resolve("dsv4-flash-perf-h200")))
    assert res.returncode == 0, res.stderr
    assert res.stdout == "1"


def test_a_callers_zero_keeps_the_plugin_off():
    res = _run(kernel_lines(resolve("dsv4-flash-perf-h200")), COOKBOOK_MXFP4_MOE="0")
    assert res.returncode == 0 and res.stdout == "0"


def test_a_broken_table_stops_the_block_before_the_switch(tmp_path):
    bad = tmp_path / "dsv4.json"
    bad.write_text(json.dumps({"variant": "glm", "configs": {}}))
    res = _run(kernel_lines(resolve("dsv4-flash-perf-h200")), COOKBOOK_MXFP4_MOE_CONFIG=str(bad))
    assert res.returncode == 1 and res.stdout == ""
    assert f"error: {bad}" in res.stderr and "expected 'dsv4'" in res.stderr


@pytest.mark.parametrize("slug", ["glm52-mxfp4-8x-gaudi2", "dsv3-perf-h200"])
def test_a_backend_the_image_provides_or_no_kernel_adds_nothing(slug):
    assert kernel_lines(resolve(slug)) == []
    assert "build.sh" not in launch_block(resolve(slug))
