"""/metrics parsing and the spec-decode formulas, on recorded Prometheus text."""

import pytest

from cookbook.gates import metrics
from cookbook.gates.spec_acceptance import judge_stats
from cookbook.recipe.gates_spec.spec_acceptance import SpecAcceptanceGate

BEFORE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 30.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 12.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 8.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 4.0
"""
AFTER = """vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 60.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 50.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 180.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 150.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 82.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 58.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 50.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 24.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 30.0
"""


def test_spec_stats_sum_engines_and_skip_created():
    s = metrics.spec_decode_stats(BEFORE, AFTER)
    assert s["drafts"] == 100 and s["draft_tokens"] == 300 and s["accepted_tokens"] == 150
    assert s["acceptance_rate"] == pytest.approx(0.5)
    assert s["mean_acceptance_length"] == pytest.approx(2.5)
    assert s["per_position_rate"] == [1.0, 0.5]


def test_spec_stats_absent_or_idle_fail():
    with pytest.raises(ValueError, match="not configured"):
        metrics.spec_decode_stats("", "vllm:num_requests_running 0\n")
    with pytest.raises(ValueError, match="did not increase"):
        metrics.spec_decode_stats(BEFORE, BEFORE)


def test_spec_thresholds():
    cfg = SpecAcceptanceGate(calibrated_on="test", min_acceptance_rate=0.6, min_mean_acceptance_length=2.0)
    s = metrics.spec_decode_stats(BEFORE, AFTER)
    checks = judge_stats(s, cfg)
    assert [ok for ok, _ in checks] == [False, True]


def test_counter_name_variants_and_labels():
    text = 'vllm:prefix_cache_hits_total{model_name="m"} 5\nvllm:prefix_cache_hits_created{model_name="m"} 99\n'
    assert metrics.counter_total(text, "vllm:prefix_cache_hits") == 5
    assert metrics.counter_total(text, "vllm:prefix_cache_hits_total") == 5
    assert metrics.counter_total(text, "vllm:missing") is None
    assert metrics.delta("", text, "vllm:prefix_cache_hits") == 5


def test_parse_reads_labels_escapes_and_skips_malformed_lines():
    text = (
        "# HELP x_total help text\n# TYPE x_total counter\n"
        'x_total{path="/a \\"b\\"",code="200"} 3\n'
        "this line is not a sample {\n"
        'y_seconds_bucket{le="+Inf"} 7\n'
        "z NaN\n"
    )
    samples = metrics.parse(text)
    assert ("x_total", {"path": '/a "b"', "code": "200"}, 3.0) in samples
    assert ("y_seconds_bucket", {"le": "+Inf"}, 7.0) in samples
    assert [s for s in samples if s[0] == "z"] and metrics.counter_total(text, "x") == 3
    assert metrics.parse("") == []
