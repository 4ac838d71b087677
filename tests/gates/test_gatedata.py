"""The gate data that ships with the cookbook, and the one gate-data default."""

import asyncio
import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from openai_standin import gate_standin

from cookbook.cli import main
from cookbook.gates import data as gate_data
from cookbook.gates import gatedata, needles
from cookbook.gates.result import GateFailure
from cookbook.recipe.gates_spec.base import BUILTIN_HAYSTACKS, BUILTIN_PROMPTS
from cookbook.recipe.gates_spec.needles import NeedlesGate
from cookbook.recipe.gates_spec.spec_acceptance import SpecAcceptanceGate

REPO = Path(__file__).resolve().parents[2]


def _words(text: str) -> int:
    return len(re.findall(r"[A-Za-z']+", text))


# ---- the built-in haystack ---------------------------------------------------------------


def test_builtin_haystack_is_long_varied_prose_with_no_repeats():
    files = gatedata.haystack_files()
    assert len(files) >= 6
    texts = [f.read_text(encoding="utf-8") for f in files]
    assert all(_words(t) >= 1500 for t in texts), [(f.name, _words(t)) for f, t in zip(files, texts)]
    assert sum(_words(t) for t in texts) >= 14000
    sents = gate_data.haystack(gate_data.DataPaths(), gatedata.HAYSTACK)
    assert len(sents) >= 600
    dupes = [s for s, n in Counter(sents).items() if n > 1]
    assert not dupes, dupes[:5]
    paras = [p for t in texts for p in re.split(r"\n\s*\n", t) if p.strip()]
    assert len(paras) == len(set(paras))
    vocabulary = {w.lower() for w in re.findall(r"[A-Za-z]+", " ".join(texts))}
    assert len(vocabulary) >= 2500  # varied (2,703 distinct words), not a few repeated
    joined = "\n".join(texts)
    assert not re.search(r"\d{7}", joined)  # the needles are 7-digit codes
    assert "magic number" not in joined.lower()  # the needle sentence's wording
    assert sents[0].startswith("Agnes Morrow kept the light")  # title lines are not prose


def test_builtin_names_in_the_spec_match_the_package():
    assert BUILTIN_HAYSTACKS == (gatedata.HAYSTACK,)
    assert BUILTIN_PROMPTS == {gatedata.TASKS: len(gatedata.tasks())}
    assert gatedata.digest(gatedata.HAYSTACK).startswith("sha256:")
    with pytest.raises(ValueError, match="unknown built-in filler"):
        NeedlesGate(calibrated_on="t", lengths_tokens=[512], fillers=["builtin:nope"])
    with pytest.raises(ValueError, match="holds 24 prompts"):
        SpecAcceptanceGate(calibrated_on="t", min_acceptance_rate=0, prompts=gatedata.TASKS, requests=25)
    # absent means GSM8K, as before; absent (not a default value) keeps the other recipes' content hashes
    assert SpecAcceptanceGate(calibrated_on="t", min_acceptance_rate=0).prompts is None


def test_builtin_prompts_are_24_distinct_natural_tasks():
    tasks = gatedata.tasks()
    assert len(tasks) == 24 and len(set(tasks)) == 24
    assert all(t[-1] in ".?" and 8 <= len(t.split()) <= 40 for t in tasks), tasks
    assert gate_data.builtin_prompts(gatedata.TASKS, 4) == tasks[:4]
    with pytest.raises(GateFailure, match="unknown built-in prompt set"):
        gate_data.builtin_prompts("builtin:other", 1)


def test_builtin_data_is_in_the_package_data():
    import tomllib

    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["cookbook"]
    assert "gates/gatedata/**/*.txt" in data
    assert (Path(gatedata.__file__).parent / "README.md").read_text().count("Apache-2.0") >= 1


# ---- needles prompts from it -------------------------------------------------------------


class _WordTokenizer:
    """A stand-in for the server's /tokenize: one token per word or punctuation mark (English
    prose gives Gemma 3 about as many: 16,451 tokens for this haystack against 17K here)."""

    async def tokenize(self, prompt=None, messages=None):
        text = prompt if prompt is not None else " ".join(m["content"] for m in messages)
        return re.findall(r"\w+|[^\w\s]", text)


class _Ctx:
    server = _WordTokenizer()


def _fit_all(sents, tok, lengths, depths, mode):
    ctx = _Ctx()
    ctx.server = tok
    ratio = 400 / len(asyncio.run(tok.tokenize(prompt=" ".join(sents[:400]))))
    rng = random.Random(1234)
    out = []
    for L in lengths:
        for depth in depths:
            keys = rng.sample(needles.KEYS, 1)
            code = str(rng.randrange(1_000_000, 10_000_000))
            start = rng.randrange(0, max(1, len(sents) - int(L * ratio * 1.5) - 1))
            req, n, window = asyncio.run(
                needles._fit(ctx, sents, start, [needles.needle_sentence(keys[0], code)], keys, depth, L, ratio, mode)
            )
            out.append((L, n, window, req))
    return out


@pytest.mark.parametrize("mode", ["completion", "chat"])
def test_builtin_haystack_builds_the_cpu_recipes_needle_prompts(mode):
    sents = gate_data.haystack(gate_data.DataPaths(), gatedata.HAYSTACK)
    for L, n, window, req in _fit_all(sents, _WordTokenizer(), [2048, 4096, 8192], [10, 50, 90], mode):
        assert 0.9 * L <= n <= L, (L, n)
        assert len(window) == len(set(window))  # no sentence used twice
        text = req.get("prompt") or req["messages"][0]["content"]
        assert text.count("The special magic number") == 1 + (mode == "completion")


@pytest.mark.engine
def test_builtin_haystack_fits_8192_gemma_tokens(gemma_checkpoint):
    """The same with the served model's own tokenizer (the CPU recipe's HF conversion's tokenizer.json)."""
    from tokenizers import Tokenizer

    tok_file = gemma_checkpoint / "tokenizer.json"
    tk = Tokenizer.from_file(str(tok_file))

    class Gemma:
        async def tokenize(self, prompt=None, messages=None):
            return tk.encode(prompt).ids

    sents = gate_data.haystack(gate_data.DataPaths(), gatedata.HAYSTACK)
    assert len(tk.encode(" ".join(sents)).ids) >= 1.5 * 8192 + 2000  # room for a random start
    for L, n, window, _ in _fit_all(sents, Gemma(), [8192], [10, 50, 90], "completion"):
        assert 0.9 * L <= n <= L and len(window) == len(set(window)), (L, n)


# ---- the one gate-data default -----------------------------------------------------------


def test_default_data_dir_is_cookbook_data_else_cache_data(monkeypatch, tmp_path):
    monkeypatch.setenv("COOKBOOK_DATA", str(tmp_path / "mine"))
    assert gate_data.default_data_dir() == tmp_path / "mine"
    monkeypatch.delenv("COOKBOOK_DATA")
    monkeypatch.setenv("COOKBOOK_ROOT", str(tmp_path))
    assert gate_data.default_data_dir() == tmp_path / ".cache" / "data"
    with pytest.raises(GateFailure, match=r"GSM8K not found at .*\.cache/data/gsm8k.*cookbook maint data fetch"):
        gate_data.gsm8k(gate_data.DataPaths.from_data_dir(gate_data.default_data_dir()), "test", 1)


@pytest.fixture
def answering_url():
    """A stand-in server that answers /v1/models (a run against no server stops before it picks data)."""
    url, server = gate_standin("gemma3-270m")
    yield url
    server.shutdown()


def test_gates_run_honours_cookbook_data(recipes_dir, tmp_path, data_dir, monkeypatch, answering_url):
    url = answering_url
    monkeypatch.setenv("COOKBOOK_DATA", str(data_dir))
    res = CliRunner().invoke(
        main, ["gates", "run", "gates-cpu", "--base-url", url, "--only", "greedy", "--out", str(tmp_path / "a")]
    )
    assert f"gate data: {data_dir} ($COOKBOOK_DATA)" in res.output, res.output
    assert json.loads((tmp_path / "a" / "results.json").read_text())["data_dir"] == str(data_dir)
    # --data-dir wins over it; with neither, the default under the checkout
    res = CliRunner().invoke(
        main,
        [
            "gates",
            "run",
            "gates-cpu",
            "--base-url",
            url,
            "--only",
            "greedy",
            "--out",
            str(tmp_path / "b"),
            "--data-dir",
            str(tmp_path),
        ],
    )
    assert json.loads((tmp_path / "b" / "results.json").read_text())["data_dir"] == str(tmp_path)
    monkeypatch.delenv("COOKBOOK_DATA")
    monkeypatch.setenv("COOKBOOK_ROOT", str(tmp_path / "checkout"))
    res = CliRunner().invoke(
        main, ["gates", "run", "gates-cpu", "--base-url", url, "--only", "greedy", "--out", str(tmp_path / "c")]
    )
    assert "(default; absent: only built-in data)" in res.output, res.output
    assert json.loads((tmp_path / "c" / "results.json").read_text())["data_dir"] == str(
        tmp_path / "checkout" / ".cache" / "data"
    )
    # a COOKBOOK_DATA that is not a folder is refused before anything runs
    monkeypatch.setenv("COOKBOOK_DATA", str(tmp_path / "none"))
    res = CliRunner().invoke(main, ["gates", "run", "gates-cpu", "--base-url", url, "--out", str(tmp_path / "d")])
    assert res.exit_code == 2 and "$COOKBOOK_DATA" in res.output and "not a directory" in res.output
    assert not (tmp_path / "d").exists()


def test_data_path_names_the_folder_and_the_builtins(monkeypatch, data_dir):
    monkeypatch.setenv("COOKBOOK_DATA", str(data_dir))
    res = CliRunner().invoke(main, ["maint", "data", "path"])
    assert res.exit_code == 0 and res.output.splitlines()[0] == str(data_dir)
    assert "gsm8k: test.jsonl, train.jsonl" in res.output and "builtin:cookbook-prose (8 texts)" in res.output
