"""Hostile input to the gates built for issue 46: recipe values, golden files from a data folder,
servers that answer with the wrong shapes. Each is one clear refusal or a failed gate, never a
traceback or a file read outside its folder."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from test_new_gates_standin import GOLDEN, run_gate

from cookbook.gates import data as gate_data
from cookbook.gates import gatedata
from cookbook.gates.golden import figures_of
from cookbook.recipe.gates_spec import GatesSpec


def spec(name, **cfg):
    return GatesSpec.model_validate({name: {"calibrated_on": "t", **cfg}})


@pytest.mark.parametrize(
    "golden", ["../x.json", "/etc/passwd", "a/b.json", "x.txt", ".hidden.json", "x" * 200 + ".json", "x.json\n"]
)
def test_a_golden_name_that_is_not_a_plain_file_name_is_refused(golden):
    with pytest.raises(ValidationError, match="golden"):
        spec("golden", golden=golden)


@pytest.mark.parametrize(
    "name,cfg,where",
    [
        ("decode", {"min_tok_s": [[999, 1.0]]}, "not in contexts_tokens"),
        ("decode", {"min_tok_s": [[2048, -1.0]]}, "above 0"),
        ("decode", {"contexts_tokens": [8]}, "at least 64"),
        ("needles", {"lengths_tokens": [1024], "window_fill_fraction": 1.5}, "window_fill_fraction"),
        ("gsm8k", {"min_correct_fraction": 0.5, "mode": "completion", "reasoning_effort": "low"}, "needs mode 'chat'"),
        ("gsm8k", {"min_correct_fraction": 0.5, "reasoning_effort": "extreme"}, "reasoning_effort"),
        ("stress", {"max_decode_gap_s": 1, "needles": 0}, "needles"),
        ("golden", {"golden": "g.json", "golden_sha256": "md5:abc"}, "golden_sha256"),
        ("reasoning_split", {"requests": 25}, "requests"),
    ],
)
def test_bad_gate_values_are_refused_with_the_field_named(name, cfg, where):
    with pytest.raises(ValidationError, match=where):
        spec(name, **cfg)


def test_a_golden_that_is_a_symlink_is_not_followed_standin(tmp_path):
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps({"ids_sha256": "x"}))
    (tmp_path / "data" / "golden").mkdir(parents=True)
    os.symlink(outside, tmp_path / "data" / "golden" / "standin.json")
    g = run_gate(tmp_path, "golden", GOLDEN, fault="cannot_run")
    assert "no recorded golden" in g["reason"]


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '"a string"', "\udcff"])
def test_a_golden_that_is_not_a_golden_fails_in_one_line_standin(tmp_path, text):
    (tmp_path / "data" / "golden").mkdir(parents=True)
    (tmp_path / "data" / "golden" / "standin.json").write_text(text, errors="surrogateescape")
    g = run_gate(tmp_path, "golden", GOLDEN, fault="cannot_run")
    assert "is not a golden.json" in g["reason"] and "\n" not in g["reason"]


def test_needles_window_without_a_served_length_is_a_clear_failure_standin(tmp_path, monkeypatch):
    cfg = {"mode": "chat", "fillers": ["builtin:cookbook-prose"], "lengths_tokens": [256], "window_fill_fraction": 0.9}
    g = run_gate(tmp_path, "needles", cfg, max_model_len=None, fault="cannot_run")
    assert "window_fill_fraction needs the served max_model_len" in g["reason"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(st.none(), st.integers(), st.text(max_size=5), st.dictionaries(st.text(max_size=3), st.integers())),
        max_size=6,
    )
)
def test_prompt_logprobs_of_any_shape_raise_only_value_error(plp):
    try:
        figures_of([1, 2, 3], {"choices": [{"prompt_logprobs": plp}]})
    except ValueError:
        pass


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=5000), st.integers(min_value=0, max_value=2**31))
def test_long_prose_never_repeats_one_word_and_reaches_its_length(n, seed):
    sents = gate_data.sentences(gatedata.haystack_text())[:300]
    out = gate_data.long_sentences(sents, n, seed)
    assert len(out) >= n and out[: len(sents)] == sents
    words = " ".join(out[:2000]).split()
    run = best = 1
    for a, b in zip(words, words[1:]):
        run = run + 1 if a == b else 1
        best = max(best, run)
    assert best <= 2
