"""benchmarks/hopper_side_by_side.py on CPU: the blocks it would serve, the alternating order, resuming
a stopped run (servers and `vllm bench serve` replaced by stand-ins: no GPU here), and the README
tables built from the recorded runs, never typed."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import benchmark_scripts
import pytest

ROOT = Path(__file__).resolve().parents[2]
SLUGS = ["glm52-fp8-8x-h200", "dsv4-flash-8x-h200", "dsv4-flash-4x-h200", "dsv4-flash-8x-h100"]


@pytest.fixture(scope="module")
def sxs():
    return benchmark_scripts.load("hopper_side_by_side")


def test_two_rounds_alternate_and_cover_every_level(sxs):
    cells = sxs.cells()
    sides = [c.side for c in cells]
    assert sides[:5] == ["recipe"] * 5 and sides[5:10] == ["peer"] * 5  # round 1: recipe, then peer
    assert sides[10:15] == ["peer"] * 5 and sides[15:] == ["recipe"] * 5  # round 2: the other order
    short = {c.concurrency for c in cells if c.input_len == 1024 and c.output_len == 256}
    assert short == {1, 16, 64, 256}
    assert sum(1 for c in cells if c.input_len == 65536) == 4
    assert len({c.key for c in cells}) == len(cells) == 20


def test_both_sides_serve_the_same_checkpoint_scaled_as_the_engine_check(sxs):
    recipe = sxs.recipe_block("glm52-fp8-8x-h200", "/ck", 8123)
    peer = sxs.peer_block("glm52", "/ck", 8123)
    for block in (recipe, peer):
        words = shlex.split(block.replace("\\\n", " "), comments=True)
        serve = words[words.index("serve") :]
        assert serve[1] == "/ck" and "--tensor-parallel-size" in serve
        assert serve[serve.index("--tensor-parallel-size") + 1] == "1"
        assert serve[-4:] == ["--load-format", "dummy", "--tokenizer-mode", "hf"]  # last wins in vLLM
        assert serve[serve.index("--port") + 1] == "8123"
    assert "--max-num-seqs 32" in recipe and "--max-num-seqs" not in peer  # the peer leaves vLLM's default
    assert sxs.served_name(peer, "/ck") == "glm-5.2-fp8"
    dsv4 = sxs.peer_block("dsv4", "/ck", 8000)
    assert sxs.served_name(dsv4, "/ck") == "/ck" and "--enable-expert-parallel" in dsv4


def test_a_stopped_run_resumes_where_it_stopped_standin(sxs, tmp_path):
    started, benched, stopped = [], [], []

    def start(side):
        started.append(side)
        return lambda: started.append("stop")

    def bench(cell):
        benched.append(cell.key)
        if len(benched) == 7 and not stopped:
            stopped.append(cell.key)
            raise RuntimeError("stopped")  # the run is stopped mid-way
        return {"output_throughput": 100.0 + cell.concurrency, "median_ttft_ms": 10.0, "median_tpot_ms": 5.0}

    with pytest.raises(RuntimeError, match="stopped"):
        sxs.run("glm52-fp8-8x-h200", "glm52", "/ck", tmp_path, start=start, bench=bench, card="stand-in")
    assert started[-1] == "stop"  # the server is stopped on the way out
    rec = json.loads((tmp_path / "side-by-side-glm52-fp8-8x-h200.json").read_text())
    assert len(rec["cells"]) == 6
    first = list(benched)
    benched.clear()
    rec = sxs.run("glm52-fp8-8x-h200", "glm52", "/ck", tmp_path, start=start, bench=bench)
    assert benched[0] == first[-1] and len(benched) == 14 and len(rec["cells"]) == 20  # nothing measured twice
    cell = rec["cells"]["r1-recipe-1024x256-c16"]
    assert len(cell["load_before"]) == 3 and cell["output_throughput"] == 116.0 and rec["card"] == "stand-in"
    table = sxs.table(rec)
    assert "| 1,024 + 256, 16 | 116.0 | 116.0 | 1.00x |" in table


@pytest.mark.parametrize("bad", ["{", "[]", '{"cells": 3}'])
def test_a_damaged_record_is_refused_with_one_message(sxs, tmp_path, bad):
    (tmp_path / "side-by-side-glm52-fp8-8x-h200.json").write_text(bad)
    with pytest.raises(SystemExit) as e:
        sxs.load_record(tmp_path / "side-by-side-glm52-fp8-8x-h200.json")
    assert "help:" in str(e.value)


def test_dry_run_prints_both_blocks_and_runs_nothing(sxs, tmp_path, capsys):
    assert sxs.main(["glm52-fp8-8x-h200", "--checkpoint", "/ck", "--out", str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# recipe\n") and "# peer\n" in out and out.count("to do ") == 20
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("slug", SLUGS)
def test_each_readme_table_is_the_recorded_run(sxs, slug):
    """The side-by-side table in a Hopper recipe's README is built from its recorded run
    (recipes/SLUG/evidence/side-by-side/*.json); until a GPU run records one, the README says the run
    is still to do and gives the command."""
    readme_dir = ROOT / "recipes" / ("dsv4-flash-8x-h200" if slug.startswith("dsv4-flash-") else slug)
    readme = (readme_dir / "README.md").read_text(encoding="utf-8")
    runs = sorted((ROOT / "recipes" / slug / "evidence" / "side-by-side").glob("*.json"))
    if runs:
        assert sxs.table(json.loads(runs[-1].read_text())) in readme
    else:
        assert f"benchmarks/hopper_side_by_side.py {slug}" in readme and "not yet run" in readme.lower()


def _script(*args):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(
        [str(ROOT / "scripts" / "offline-gpu" / "side-by-side"), *args],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip


def test_the_gpu_wrapper_dry_run_names_the_engine_checks_checkpoint():
    p = _script("--dry-run", "glm52-fp8-8x-h200:recipes/glm52-fp8-8x-h200/engine-check/config.json")
    assert p.returncode == 0, p.stderr
    assert ".cache/engine-check/ckpt/engine-check-glm52-fp8-8x-h200" in p.stdout  # the engine check's own
    assert p.stdout.count("to do ") == 20 and "# peer" in p.stdout


@pytest.mark.parametrize(
    "case", ["glm52-fp8-8x-h200", "x:../../etc/passwd", "Bad;slug:README.md", "a:README.md:extra", ""]
)
def test_the_gpu_wrapper_refuses_a_bad_case_before_anything_starts(case):
    p = _script("--dry-run", case)
    assert p.returncode == 2 and "help:" in p.stderr and "# recipe" not in p.stdout


@pytest.mark.parametrize("kind", ["fifo", "dir", "big"])
def test_a_recorded_run_that_is_not_a_small_file_is_refused(sxs, tmp_path, kind):
    import os

    path = tmp_path / "side-by-side-glm52-fp8-8x-h200.json"
    if kind == "fifo":
        os.mkfifo(path)  # reading it would hang the resumed run
    elif kind == "dir":
        path.mkdir()
    else:
        path.write_text('{"cells": {}, "pad": "' + "x" * (17 * 2**20) + '"}')
    with pytest.raises(SystemExit) as e:
        sxs.load_record(path)
    assert "not a small regular file" in str(e.value) and "help:" in str(e.value)
