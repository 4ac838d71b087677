"""A path for every Hopper owner (issue 63, item 3): `cookbook list --platform/--gpus` judges the
recipes for that hardware, an H200 recipe whose plan fits an H100 reads "plan fits" there (not "no"),
and `serve`'s refusal says what runs here instead. The machine is set with $COOKBOOK_PLATFORM (the
catalogue's override for tests); nothing is served."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cookbook import platforms
from cookbook.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_detect():
    platforms.detect.cache_clear()
    yield
    platforms.detect.cache_clear()


def run(*argv, env=None):
    platforms.detect.cache_clear()  # $COOKBOOK_PLATFORM differs from call to call
    return CliRunner().invoke(main, list(argv), env=env or {}, prog_name="cookbook")


def rows(res) -> dict[str, dict]:
    return {r["slug"]: r for r in json.loads(res.stdout)["recipes"]}


def test_list_for_8x_h100_shows_the_hopper_recipes_judged_by_their_plan():
    res = run("list", "--platform", "h100", "--gpus", "8", "--json")
    assert res.exit_code == 0, res.output
    got = rows(res)
    assert json.loads(res.stdout)["judged_for"] == "8x h100"
    # the H200 recipes whose plan fits 8x H100 say so; the one that does not says no, with the plan's reason
    assert got["dsv4-flash-8x-h200"]["fit"] == "plan fits" and "--platform h100" in got["dsv4-flash-8x-h200"]["reason"]
    assert got["gemma3-270m-h200"]["fit"] == "plan fits"
    assert got["glm52-fp8-8x-h200"]["fit"] == "no" and "does not fit" in got["glm52-fp8-8x-h200"]["reason"]
    assert "k3-mxfp4-16x-h200" not in got  # 16 GPUs
    assert not any(r["hardware"].endswith(("mi300x", "gaudi2", "cpu", "a100-80gb")) for r in got.values())


def test_list_filters_by_gpu_count():
    got = rows(run("list", "--platform", "h100", "--gpus", "1", "--json"))
    assert "gemma3-270m-h200" in got and "dsv4-flash-4x-h200" not in got and "dsv4-flash-8x-h200" not in got
    got = rows(run("list", "--gpus", "2", "--json"))
    assert all(int(r["hardware"].split("x")[0]) <= 2 for r in got.values() if "x " in r["hardware"])
    assert "glm52-2" in got and "glm52-4" not in got


def test_list_table_for_h100_says_plan_fits_not_no():
    res = run("list", "--platform", "h100", "--gpus", "1")
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("gemma3-270m-h200 "))
    assert "plan fits" in line and " no:" not in line
    assert "judged for: 1x h100" in res.stdout and res.stdout.splitlines()[0].split()[-1] == "THERE"


def test_list_on_an_h100_machine_does_not_say_no_to_an_h200_recipe_whose_plan_fits():
    got = rows(run("list", "--json", env={"COOKBOOK_PLATFORM": "h100:1"}))
    assert got["gemma3-270m-h200"]["fit"] == "plan fits", got["gemma3-270m-h200"]
    assert got["dsv4-flash-8x-h200"]["fit"] == "no"  # needs 8 GPUs; this machine has 1
    assert got["glm52-2"]["fit"] == "no"  # another GPU kind
    assert "other hardware: cookbook list --platform ID" in run("list").stdout


def test_list_unknown_platform_is_one_message_naming_the_catalogue():
    res = run("list", "--platform", "h1000")
    assert res.exit_code == 2 and res.stdout == ""
    assert "--platform h1000: no such platform" in res.stderr and "h100, h200" in res.stderr
    res = run("list", "--platform", "\x1b[2Jh100")
    assert res.exit_code == 2 and "\x1b" not in res.stderr


def test_list_that_matches_nothing_says_what_is_nearest():
    res = run("list", "--platform", "mi300x", "--gpus", "1")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("no recipe runs on 1x mi300x; nearest, with more GPUs: ")
    assert "glm52-2 (2 GPUs)" in res.stdout
    doc = json.loads(run("list", "--platform", "mi300x", "--gpus", "1", "--json").stdout)
    assert doc["recipes"] == [] and "glm52-2" in doc["nearest"]


def test_serve_an_h200_recipe_on_an_h100_is_refused_honestly():
    """gates/README.md records gemma3-270m-h200's server running on an H100: the refusal says the
    block can start here, and why serve still refuses, and how to start it anyway."""
    res = run("serve", "gemma3-270m-h200", env={"COOKBOOK_PLATFORM": "h100:1"})
    assert res.exit_code == 2, res.output
    err = res.stderr
    assert "cannot serve gemma3-270m-h200 on this machine" in err
    assert "Its block can start here" in err and "its plan fits 1x h100" in err
    assert "gate bars and evidence are for 1x h200" in err
    assert "cookbook serve gemma3-270m-h200 --set hardware.platform=h100" in err


def test_serve_on_the_cpu_names_this_cpus_recipe():
    from cookbook.host_cpu import cpu_recipe

    res = run("serve", "gemma3-270m-h200", env={"COOKBOOK_PLATFORM": "cpu"})
    assert res.exit_code == 2
    assert f"`cookbook serve {cpu_recipe()}`, the closest recipe that runs here (Gemma 3 270M on the CPU)" in res.stderr


def test_serve_names_the_h100_recipe_as_the_closest_on_an_h100():
    """gemma3-270m-h100 (a child of gemma3-270m-h200 on hardware.platform h100): the refusal of the
    H200 recipe on an H100 points at it, and `list --platform h100` says yes to it."""
    res = run("serve", "gemma3-270m-h200", env={"COOKBOOK_PLATFORM": "h100:1"})
    assert res.exit_code == 2
    assert (
        "`cookbook serve gemma3-270m-h100`, the closest recipe that runs here (Gemma 3 270M on 1x h100)" in res.stderr
    )
    got = rows(run("list", "--platform", "h100", "--gpus", "1", "--json"))
    assert got["gemma3-270m-h100"]["fit"] == "yes" and got["gemma3-270m-h200"]["fit"] == "plan fits"


def test_serve_names_a_recipe_of_the_same_model_before_another(tmp_path):
    """Of the recipes that run here, the same model's comes first: a second H100 recipe of another
    model (written into a temporary recipes folder) is not the one named for gemma3-270m-h200."""
    root = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", root)
    (root / "aaa-other-h100").mkdir()
    (root / "aaa-other-h100" / "recipe.yaml").write_text(
        (ROOT / "recipes" / "dsv4-flash-perf-h200" / "recipe.yaml")
        .read_text(encoding="utf-8")
        .replace("name: dsv4-flash-perf-h200", "name: aaa-other-h100")
        .replace("platform: h200", "platform: h100")
        .replace("  benchmark_only:", "  # benchmark_only:"),  # a model recipe (a benchmark is never named)
        encoding="utf-8",
    )
    env = {"COOKBOOK_PLATFORM": "h100:1", "COOKBOOK_RECIPES": str(root)}
    got = rows(run("list", "--platform", "h100", "--gpus", "1", "--json", env=env))
    assert got["aaa-other-h100"]["fit"] == "yes"  # it runs here, and sorts first by name
    res = run("serve", "gemma3-270m-h200", env=env)
    assert res.exit_code == 2 and "`cookbook serve gemma3-270m-h100`, the closest" in res.stderr, res.stderr
    # on 8x H100 the DeepSeek-V4-Flash 8x H200 recipe's own plan fits: started anyway with --set
    res = run("serve", "dsv4-flash-8x-h200", env={**env, "COOKBOOK_PLATFORM": "h100:8"})
    assert "Its block can start here" in res.stderr and "--set hardware.platform=h100" in res.stderr
    assert "`cookbook serve dsv4-flash-8x-h100`, the closest recipe that runs here" in res.stderr


def test_show_prints_rule_messages_with_their_values():
    """`show` printed rule messages as templates (`--block-size {serve.args.block_size}`)."""
    import re

    for slug in ("glm52-2", "dsv4-flash-8x-h200", "glm52-fp8-8x-h200", "k3-8"):
        res = run("show", slug)
        assert res.exit_code == 0, res.output
        rules = res.stdout.split("rules (each refuses", 1)[1].split("\ngates", 1)[0]
        assert not re.findall(r"(?<!\$)\{[A-Za-z_][A-Za-z0-9_.]*\}", rules), (slug, rules)
    res = run("show", "glm52-2")
    assert "--block-size 64: --block-size 64 is required" in res.stdout
