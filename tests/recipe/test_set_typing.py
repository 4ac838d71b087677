"""`--set` is typed by the generated schema (issue 47): vLLM's flags by their catalogue
(cookbook.recipe.flags, from vLLM's own parser), the rest of the recipe by its schema, a fork's flag
by the recipe's own value. A wrong type, a value out of range, an unknown or misspelt key and a
nested key each get one message and exit 2, never a traceback; null unsets a flag."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cookbook.cli import main
from cookbook.recipe import flags
from cookbook.recipe.model import json_schema

REPO = Path(__file__).resolve().parents[2]


def invoke(*argv: str):
    return CliRunner().invoke(main, list(argv))


def one_refusal(r, *, code: int = 2) -> str:
    """The refusal's text, after checking it is one clean message with exit 2."""
    assert r.exit_code == code, r.output
    assert isinstance(r.exception, SystemExit) or r.exception is None, repr(r.exception)
    assert "Traceback" not in r.output
    assert r.stdout == "", "a refused --set printed a block"
    assert r.stderr.startswith("error: ") and r.stderr.count("\nR1") == 1, r.stderr
    assert "help:" in r.stderr
    return r.stderr


@pytest.mark.parametrize(
    "slug,item,says",
    [
        ("glm52-2", "max_model_len=abc", "expected an integer >= 1"),  # was a ValueError in the plan
        ("gemma3-270m-cpu", "max_model_len=abc", "expected an integer >= 1"),  # was printed into the block
        (
            "gemma3-270m-cpu",
            "max_num_seqs=-4",
            "expected an integer >= 1 and <= 9223372036854775807 (null: no flag), got -4",
        ),
        ("gemma3-270m-cpu", "serve.args.max_model_lenn=8", "did you mean serve.args.max_model_len"),
        ("k3-6", "tensor_parallel_size=two", 'got "two"'),  # was "R010 rules.1: cannot compute ..."
        ("glm52-2", "serve.args.speculative_config.method=mtp", "is one setting; its parts cannot be set"),
        ("glm52-2", "gpu_memory_utilization=1.5", "a number > 0 and <= 1"),
        ("glm52-2", "enable_prefix_caching=yess", "true or false"),
        ("glm52-2", "hardware.gpus=-1", "less than the minimum of 0"),
        ("glm52-2", "model.architecture.layers=0", "less than the minimum of 1"),
        ("glm52-2", "model.source.size_gib=0", "less than or equal to the minimum of 0"),
        ("gemma3-270m-cpu", "VLLM_CPU_KVCACHE_SPACE={a: 1}", "expected a string or a number"),
        (
            "gemma3-270m-cpu",
            "VLLM_CPU_KVCACHE_SPACE=abc",
            'expected a number like the recipe\'s "2"',
        ),  # the plan reads it
        ("glm52-mxfp4-8x-gaudi2", "VLLM_GRAPH_RESERVED_MEM=lots", "expected a number like the recipe's 0.2"),
        ("glm52-2", "max_model_len=.nan", "not a finite number"),
    ],
)
def test_the_issues_examples_are_refused_in_one_message(slug, item, says):
    text = one_refusal(invoke("launch", slug, "--set", item))
    assert says in text, text


def test_null_unsets_a_flag_and_rules_see_it_unset():
    r = invoke("launch", "gemma3-270m-cpu", "--set", "max_num_seqs=null")
    assert r.exit_code == 0 and "--max-num-seqs" not in r.stdout
    # glm52-2's 1M rule needs speculation off: null is "off", and the rule lets 1M through at one sequence
    sets = ["--set", "max_model_len=1048576", "--set", "serve.args.speculative_config=null", "--set", "max_num_seqs=1"]
    r = invoke("launch", "glm52-2", *sets)
    assert r.exit_code == 0, r.output


def test_a_typed_value_is_accepted_and_rendered():
    r = invoke("launch", "gemma3-270m-cpu", "--set", "max_model_len=4096", "--set", "serve.args.seed=7")
    assert r.exit_code == 0 and "--max-model-len 4096" in r.stdout and "--seed 7" in r.stdout


def test_a_forks_flag_keeps_the_recipes_type():
    """A flag vLLM 0.32.0 does not know (a fork's) keeps the JSON type the recipe gives it."""
    from cookbook.recipe.overrides import apply_sets

    data = {"serve": {"args": {"fork_only_flag": {"value": "nccl", "why": "the fork's README"}}}}
    _, diags = apply_sets(data, ["serve.args.fork_only_flag=[1]"])
    assert len(diags) == 1 and 'expected a string like the recipe\'s "nccl"' in diags[0].render()
    out, diags = apply_sets(data, ["serve.args.fork_only_flag=gloo"])
    assert diags == [] and out["serve"]["args"]["fork_only_flag"]["value"] == "gloo"
    _, diags = apply_sets(data, ["serve.args.another_fork_flag=1"])  # new, and not vLLM's: refused
    assert len(diags) == 1 and "vLLM has no such flag" in diags[0].render()


def test_the_generated_schema_types_the_flags():
    args = json_schema()["$defs"]["Serve"]["properties"]["args"]["properties"]
    v = jsonschema.Draft202012Validator({"$defs": json_schema()["$defs"], **args["max_model_len"]})
    assert v.is_valid(8192) and v.is_valid({"value": 8192, "why": "the document"}) and v.is_valid(None)
    for bad in ("abc", 0, -1, 1.5, 2**31, {"value": "abc"}):
        assert not v.is_valid(bad), bad
    assert set(flags.catalogue()) >= {"max_model_len", "tensor_parallel_size", "speculative_config", "port"}


def test_lint_refuses_a_recipe_file_with_a_wrong_type(tmp_path):
    src = (flags.CATALOGUE_FILE.parents[3] / "recipes" / "gemma3-270m-cpu" / "recipe.yaml").read_text()
    d = tmp_path / "recipes" / "gemma3-270m-cpu"
    d.mkdir(parents=True)
    assert "      value: 16\n" in src
    (d / "recipe.yaml").write_text(src.replace("      value: 16\n", "      value: many\n", 1))
    r = invoke("lint", str(d / "recipe.yaml"))
    assert r.exit_code != 0 and "serve.args.max_num_seqs" in r.output and "expected an integer >= 1" in r.output
    r = invoke("lint", "--json", str(d / "recipe.yaml"))
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["checked"] == 1 and doc["errors"] >= 1
    bad = [x for x in doc["diagnostics"] if x["key"] == "serve.args.max_num_seqs"]
    assert bad and bad[0]["id"] == "R006" and bad[0]["line"] and "expected an integer >= 1" in bad[0]["problem"]


# ---- property: ~100 generated bad values, each one message and exit 2 ----

INT_FLAGS = ["max_model_len", "max_num_seqs", "tensor_parallel_size", "block_size", "max_num_batched_tokens", "port"]
BOOL_FLAGS = ["enable_prefix_caching", "enforce_eager"]
REAL_KEYS = [f"serve.args.{k}" for k in INT_FLAGS + BOOL_FLAGS] + ["hardware.gpus", "model.architecture.layers"]


def _misspelt(key: str, i: int, ch: str) -> str:
    i %= len(key)
    return key[:i] + ch + key[i:]


bad_for_int = st.one_of(
    st.integers(max_value=0).map(str),  # zero and negatives
    st.integers(min_value=2**70).map(str),  # beyond any range (port, and the planner's int math)
    st.sampled_from([".nan", ".inf", "-.inf", "1e400", "abc", "two", "[1, 2]", "{a: 1}", "true", "1.5", "0x", "''"]),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not float(f).is_integer()).map(repr),
    st.text(alphabet="abcxyz-_ ", min_size=1, max_size=8).filter(lambda t: not t.strip().isdigit()),
)
bad_for_bool = st.sampled_from(["yess", "2", "-1", "abc", "[true]", "{x: 1}", "0.5", ".nan"])
cases = st.one_of(
    st.tuples(st.sampled_from([f"serve.args.{k}" for k in INT_FLAGS]), bad_for_int),
    st.tuples(st.just("hardware.gpus"), bad_for_int.filter(lambda v: v != "0")),  # 0 GPUs is the CPU's
    st.tuples(st.just("model.architecture.layers"), bad_for_int.filter(lambda v: not v.isdigit())),
    st.tuples(st.sampled_from([f"serve.args.{k}" for k in BOOL_FLAGS]), bad_for_bool),
    # unknown and misspelt keys (an x inserted somewhere), full and shorthand
    st.tuples(
        st.builds(_misspelt, st.sampled_from(REAL_KEYS), st.integers(0, 40), st.sampled_from("xq")).filter(
            lambda k: k.rsplit(".", 1)[-1] not in flags.catalogue()
        ),
        st.sampled_from(["1", "abc", "null"]),
    ),
    # nested keys below a flag's value, or below a scalar
    st.tuples(
        st.sampled_from(["serve.args.speculative_config.method", "serve.args.max_model_len.x", "hardware.gpus.n"]),
        st.sampled_from(["1", "x", "null"]),
    ),
    # text where the schema wants a number
    st.tuples(st.sampled_from(["hardware.gpus", "model.source.size_gib"]), st.just("abc")),
    # an env value the planner computes with, as text or a mapping
    st.tuples(st.just("VLLM_CPU_KVCACHE_SPACE"), st.sampled_from(["abc", "{a: 1}", "[2]", "two GiB"])),
)


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=cases,
    slug=st.sampled_from(["glm52-2", "gemma3-270m-cpu", "k3-6"]),
    command=st.sampled_from(["launch", "plan"]),
)
def test_generated_bad_set_values_get_one_message_and_exit_2(case, slug, command):
    key, value = case
    if key == "VLLM_CPU_KVCACHE_SPACE":
        slug = "gemma3-270m-cpu"
    r = invoke(command, slug, "--set", f"{key}={value}")
    text = one_refusal(r)
    assert "--set" in text and key.split(".")[-1] in text or key in text


@pytest.mark.engine
def test_the_catalogue_is_vllms_parser():
    """vllm_flags.json is what vLLM's own parser says (regenerate: scripts/vllm-flags --write)."""
    pytest.importorskip("vllm")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "vllm-flags")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
