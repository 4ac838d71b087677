import json
import subprocess
import sys

import pytest
from recipe_helpers import check_golden

from cookbook.plan.launch_block import launch_block, planned
from cookbook.recipe import resolve
from cookbook.recipe.launch import server_argv


@pytest.mark.parametrize("slug,quant", [("demo-2", None), ("demo-4", "Q4_K")])
def test_launch_block_matches_snapshot(valid_recipes, slug, quant):
    check_golden(f"launch/{slug}{'-' + quant if quant else ''}.sh", launch_block(resolve(slug, quant)))


@pytest.mark.parametrize("slug", ["demo-2", "demo-4"])
def test_launch_block_parses_in_bash(valid_recipes, slug):
    block = launch_block(resolve(slug))
    p = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_pasted_block_gives_the_same_argv_as_server_argv(valid_recipes, tmp_path):
    """Run the block in bash with `vllm` replaced by a printer: JSON flags survive quoting."""
    resolved = resolve("demo-2")
    block = launch_block(resolved)
    script = (
        "vllm() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' \"$@\"; }\nMODELS=/models\n" + block
    )
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    argv = json.loads(p.stdout.strip().splitlines()[-1])
    expected = server_argv(resolved, planned(resolved))[1:]
    expected[1] = expected[1].replace("$MODELS", "/models")
    assert argv == expected
    assert json.loads(argv[argv.index("--attention-config") + 1]) == {"sparse_mla_force_mqa": True}


def test_launch_refusal_is_one_clear_message_and_nonzero(valid_recipes):
    p = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "launch", "demo-2", "--quant", "Q4_K"], capture_output=True, text=True
    )
    assert p.returncode == 2
    assert p.stdout == ""
    assert "error: cannot launch demo-2 --quant Q4_K" in p.stderr
    assert "help: use demo-4" in p.stderr
    assert "Traceback" not in p.stderr


def test_an_empty_or_spaced_reference_stays_one_argument():
    """`--served-model-name $P` with P unset would drop the value and take the next flag as it."""
    import subprocess

    from cookbook.recipe import shell

    words = " ".join(shell.quote_arg(w) for w in ["--a", "$P", "--b", "$S/x", "${Q:-d}"])
    out = subprocess.run(
        ["bash", "-c", f'printf "[%s]" {words}'],
        env={"S": "with space", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "[--a][][--b][with space/x][d]"


def test_a_null_set_drops_the_flag_and_the_rules_that_use_it_still_evaluate():
    from click.testing import CliRunner

    from cookbook.cli import main
    from cookbook.plan.launch_block import launch_block
    from cookbook.recipe.resolve import resolve

    block = launch_block(resolve("k3-8", sets=["serve.args.data_parallel_size=null"]))
    assert "--data-parallel-size" not in block and "--tensor-parallel-size 2" in block
    # one TP2 replica of Kimi K3 does not fit two GPUs: `launch` refuses it with the plan's numbers
    res = CliRunner().invoke(main, ["launch", "k3-8", "--set", "serve.args.data_parallel_size=null"])
    assert res.exit_code == 2 and "does not fit" in res.output and "--data-parallel-size" not in res.output
    # the rule that multiplies by it still fires on a real misfit
    res = CliRunner().invoke(main, ["launch", "k3-8", "--set", "serve.args.data_parallel_size=3"])
    assert res.exit_code != 0 and "ranks-fit-gpus" in res.output, res.output


def test_a_block_for_another_checkpoint_says_its_fit_is_not_checked():
    """serve.model set (the engine check's scaled copy, a user's own quant): the plan's weights are the
    recipe's, so launch does not refuse on them, and says so on stderr; without it the misfit is refused."""
    from click.testing import CliRunner

    from cookbook.cli import main

    scaled = ["launch", "glm52-fp8-8x-h200", "--set", "tensor_parallel_size=1"]
    res = CliRunner().invoke(main, scaled)
    assert res.exit_code == 2 and "does not fit" in res.output
    res = CliRunner().invoke(main, [*scaled, "--set", "serve.model=/ck/glm"])
    assert res.exit_code == 0, res.output
    assert "--tensor-parallel-size 1" in res.stdout and "/ck/glm" in res.stdout
    assert "the fit of glm52-fp8-8x-h200 is not checked" in res.stderr and "note:" not in res.stdout
