"""serving/buckets: the generator reproduces the committed bucket file the Gaudi recipe loads,
reproduces vllm-gaudi's exponential defaults, and the format check rejects what vllm-gaudi
would silently skip."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cookbook import buckets as B
from cookbook.recipe.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "serving/buckets/glm52-mxfp4-tp8-seqs4-128k.yaml"
PORT_PREFIX = "/opt/gaudi-cookbook/"  # the image copies the repository there


def cookbook(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "cookbook.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_generator_yields_the_committed_file():
    spec = B.load_spec(SPEC, ROOT)
    committed = (ROOT / spec.output).read_text()
    assert B.generated_text(spec, ROOT) == committed


def test_recipe_loads_the_generated_file():
    spec = B.load_spec(SPEC, ROOT)
    r = resolve(spec.recipe)
    env_path = r.recipe.env["VLLM_BUCKETING_FROM_FILE"].value
    assert env_path == PORT_PREFIX + str(spec.output)
    # the spec's geometry is the recipe's serving geometry
    args = r.recipe.serve.args
    g = spec.geometry
    assert (g.block_size, g.max_model_len, g.max_num_seqs, g.max_num_batched_tokens) == (
        args["block_size"].value,
        args["max_model_len"].value,
        args["max_num_seqs"].value,
        args["max_num_batched_tokens"].value,
    )
    # the KV pool the document reports, in blocks
    pool = next(rep.values["kv_pool_tokens"] for rep in r.recipe.reported if "kv_pool_tokens" in rep.values)
    assert g.kv_cache_blocks == pool // g.block_size


def test_committed_file_has_the_documented_rows():
    spec = B.load_spec(SPEC, ROOT)
    prompt, decode = B.parse((ROOT / spec.output).read_text())
    assert B.check_against(spec.geometry, prompt, decode, "f") == []
    decode_bs = sorted({b[0] for b in decode})
    assert decode_bs == [1, 2, 3, 4]  # exponential defaults 1, 2, 4 plus the documented 3
    # every default bucket is present, and the batch-3 row covers the batch-4 contexts
    assert set(B.decode_buckets(spec.geometry)) <= set(decode)
    assert {c for b, _, c in decode if b == 3} == {c for b, _, c in decode if b == 4}
    assert set(B.prompt_buckets(spec.geometry)) == set(prompt)


def test_check_mode_fails_on_a_stale_file(tmp_path):
    root = tmp_path
    (root / "serving/buckets").mkdir(parents=True)
    spec_text = SPEC.read_text()
    (root / "serving/buckets/x.yaml").write_text(spec_text)
    (root / "recipes").mkdir()
    (root / "pyproject.toml").write_text("")
    env = {"COOKBOOK_ROOT": str(root), "PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}

    def run(*a):
        return subprocess.run(
            [sys.executable, "-m", "cookbook.cli", "maint", "buckets", *a],
            capture_output=True,
            text=True,
            cwd=root,
            env=env,
        )

    missing = run("generate", "--check")
    assert missing.returncode == 1 and "stale" in missing.stderr
    assert run("generate").returncode == 0
    assert run("generate", "--check").returncode == 0
    out = root / "ports/glm-5-mxfp4/serving/tp8-seqs4-128k.txt"
    out.write_text(out.read_text().replace("(3, 1,", "(3, 1, [4])\n#(3, 1,"))
    stale = run("generate", "--check")
    assert stale.returncode == 1 and "tp8-seqs4-128k.txt is stale" in stale.stderr
    assert not list(out.parent.glob("*.tmp"))


def test_exponential_range_matches_vllm_gaudi_docstring_example():
    # vllm-gaudi's warmup_range_with_limit docstring: bmin 128, step 128, bmax 2048, 10 buckets
    assert B.exponential_range(128, 128, 2048, 10) == [128, 256, 384, 512, 640, 896, 1152, 1536, 2048]


def test_exponential_range_keeps_zero_and_one():
    assert B.exponential_range(0, 1, 960, 11)[0] == 0
    assert B.exponential_range(1, 2, 4, 3) == [1, 2, 4]
    assert B.exponential_range(1, 2, 1, 1) == [1]


def test_geometry_rejects_nonsense():
    with pytest.raises(B.BucketError, match="block_size"):
        B.Geometry(0, 1024, 4, 8192, 100)
    with pytest.raises(B.BucketError, match="extra_decode_batch_sizes"):
        B.Geometry(128, 1024, 4, 8192, 100, extra_decode_batch_sizes=(5,))


@pytest.mark.parametrize(
    "line, words",
    [
        ("(1, 128)", "3-tuple"),
        ("(1, 1, range(4, 64, 4))", "literal_eval"),
        ("(1, 128, [0, 'a'])", "integers"),
        ("(1, 128, [])", "non-empty"),
        ("(1, 128, 0", "not a Python tuple"),
        ("(0, 1, 8)", ">= 1"),
    ],
)
def test_format_check_rejects_lines_vllm_gaudi_would_skip(line, words):
    text = "(1, 128, 0)\n(1, 1, 4)\n" + line + "\n"
    with pytest.raises(B.BucketError, match=words) as exc:
        B.parse(text, "buckets.txt")
    assert "buckets.txt:3" in str(exc.value)


def test_format_check_rejects_duplicates_and_missing_phases():
    with pytest.raises(B.BucketError, match="repeats line 1"):
        B.parse("(1, [128, 256], 0)\n(1, 256, 0)\n(1, 1, 4)\n")
    with pytest.raises(B.BucketError, match="prompt and decode"):
        B.parse("(1, 128, 0)\n")


def test_check_against_flags_buckets_vllm_gaudi_drops():
    g = B.Geometry(128, 131072, 4, 8192, 2445)
    problems = B.check_against(g, [(1, 8192, 1000), (2, 128, 0)], [(8, 1, 4), (4, 1, 2)], "f")
    text = "\n".join(problems)
    assert "(1, 8192, 1000)" in text and "max_model_len" in text
    assert "(2, 128, 0)" in text and "prefill" in text
    assert "(8, 1, 4)" in text and "max_num_seqs" in text
    assert "(4, 1, 2)" in text and "fewer blocks" in text


def test_cli_check_reports_file_and_line(tmp_path):
    bad = tmp_path / "b.txt"
    bad.write_text("(1, 128, 0)\n(1, 1, 4)\n(1, 1)\n")
    res = cookbook("buckets", "check", str(bad))
    assert res.returncode == 2 and f"{bad}:3" in res.stderr and "Traceback" not in res.stderr
    good = cookbook("buckets", "check", str(ROOT / "ports/glm-5-mxfp4/serving/tp8-seqs4-128k.txt"), "--spec", str(SPEC))
    assert good.returncode == 0, good.stderr
    assert "144 prompt and 52 decode buckets" in good.stdout


def test_bad_spec_is_one_clear_error(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "title: x\noutput: /etc/passwd\ngeometry: {block_size: 128, max_model_len: 1024, "
        "max_num_seqs: 1, max_num_batched_tokens: 1024, kv_cache_blocks: 8}\n"
    )
    res = cookbook("buckets", "generate", str(spec))
    assert res.returncode == 2 and "inside the repository" in res.stderr and "Traceback" not in res.stderr
    spec.write_text("title: x\noutput: a.txt\ngeometry: {block_sise: 128}\n")
    res = cookbook("buckets", "generate", str(spec))
    assert res.returncode == 2 and "block_sise" in res.stderr
