"""needles in completion mode (for base models): prompt form and spec validation."""

import pytest
from pydantic import ValidationError

from cookbook.gates.needles import completion_prompt, request_for, score
from cookbook.recipe.gates_spec.needles import NeedlesGate


def test_completion_prompt_ends_with_the_needle_sentence_start():
    req = request_for("completion", "Call me Ishmael.", ["amber harbour"])
    assert req == {"prompt": "Call me Ishmael.\n\nThe special magic number for the amber harbour is"}
    assert completion_prompt("x", "pale candle").endswith("for the pale candle is")


def test_chat_request_is_one_user_turn():
    req = request_for("chat", "Call me Ishmael.", ["amber harbour"])
    assert list(req) == ["messages"] and req["messages"][0]["role"] == "user"


def test_completion_mode_needs_one_code_per_prompt():
    with pytest.raises(ValidationError, match="codes_per_prompt: 1"):
        NeedlesGate(calibrated_on="t", lengths_tokens=[512], mode="completion", codes_per_prompt=2)
    assert NeedlesGate(calibrated_on="t", lengths_tokens=[512], mode="completion").mode == "completion"


@pytest.mark.parametrize("text,found", [(" 6949798", 1), (" 6949789", 0), ("", 0)])
def test_completion_answers_score_as_substrings(text, found):
    assert score(text, ["6949798"], "Call me Ishmael some years ago never mind how long")["found_count"] == found
