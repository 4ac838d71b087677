import pytest

from cookbook.recipe import expr

CTX = {
    "serve": {
        "args": {
            "block_size": {"value": 64, "why": "x"},
            "tensor_parallel_size": 8,
            "attention_config": {"value": {"sparse_mla_force_mqa": True}},
        }
    },
    "hardware": {"gpus": 2},
    "quant": {"name": "Q4_K", "min_gpus": 4},
    "env": {"VLLM_ROCM_USE_AITER": {"value": "1"}},
}


@pytest.mark.parametrize(
    "text,expected",
    [
        ("quant.min_gpus > hardware.gpus", True),
        ("quant.min_gpus <= hardware.gpus", False),
        ("serve.args.block_size % 64 == 0", True),
        ("serve.args.block_size == 256", False),
        ("96 % serve.args.tensor_parallel_size != 0", False),
        ("serve.args.attention_config.sparse_mla_force_mqa == true", True),
        ("env.VLLM_ROCM_USE_AITER != '1'", False),
        ("quant.name in ['Q4_K', 'Q6_K']", True),
        ("not defined(serve.args.enforce_eager)", True),
        ("defined(serve.args.block_size) and serve.args.block_size > 32", True),
        ("lower(quant.name) == 'q4_k'", True),
    ],
)
def test_evaluates(text, expected):
    assert expr.evaluate(text, CTX) is expected


def test_missing_key_is_never_ordered_and_equals_only_null():
    assert expr.evaluate("serve.args.max_model_len > 0", CTX) is False
    assert expr.evaluate("serve.args.max_model_len < 0", CTX) is False
    assert expr.evaluate("serve.args.max_model_len == null", CTX) is True
    assert expr.evaluate("serve.args.max_model_len != 5", CTX) is True


def test_a_null_setting_is_missing_like_an_absent_key():
    # `--set serve.args.data_parallel_size=null` renders no flag, so rules must see no value either
    ctx = {"serve": {"args": {"tensor_parallel_size": 2, "data_parallel_size": None}}, "hardware": {"gpus": 8}}
    assert expr.evaluate("defined(serve.args.data_parallel_size)", ctx) is False
    assert expr.evaluate("serve.args.data_parallel_size == null", ctx) is True
    assert expr.evaluate("serve.args.data_parallel_size > 0", ctx) is False
    rule = "defined(serve.args.data_parallel_size) and hardware.gpus % (serve.args.tensor_parallel_size * serve.args.data_parallel_size) != 0"
    assert expr.evaluate(rule, ctx) is False


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os')",
        "serve.args.block_size >> 2",
        "open('/etc/passwd')",
        "[x for x in y]",
        "lambda: 1",
        "a if b else c",
        "serve.args['x']",
        "len(a, b)",
        "(",
        "x" * 3000,
    ],
)
def test_rejects_anything_outside_the_language(text):
    with pytest.raises(expr.ExprError):
        expr.evaluate(text, CTX)


def test_names_lists_the_keys_a_rule_reads():
    assert expr.names("quant.min_gpus > hardware.gpus and not defined(env.X)") == [
        "quant.min_gpus",
        "hardware.gpus",
        "env.X",
    ]


@pytest.mark.parametrize(
    "pin,ok",
    [("0.27.1", True), ("0.28.0", True), ("1.0", True), ("0.27.1.post1", True), ("0.27.0", False), ("0.26.1", False)],
)
def test_version_compares_releases_not_strings(pin, ok):
    """issue 65: K3's engine rule is a minimum (a deny-list let 0.26.1 through); as strings '0.100' < '0.27'."""
    ctx = {"image": {"engine": {"version": pin}}}
    assert expr.evaluate("version(image.engine.version) >= version('0.27.1')", ctx) is ok


def test_version_of_a_missing_key_is_missing_and_of_junk_refused():
    assert expr.evaluate("version(image.engine.version) >= version('0.27.1')", {}) is False
    with pytest.raises(expr.ExprError, match=r"image.engine.version is 'banana': not a release number"):
        expr.evaluate(
            "version(image.engine.version) >= version('0.27.1')", {"image": {"engine": {"version": "banana"}}}
        )
    with pytest.raises(expr.ExprError, match="only defined"):
        expr.parse("version('1', '2')")
    assert expr.evaluate("version('0.100.0') > version('0.27.1')", {}) is True


@pytest.mark.parametrize(
    "text",
    ["len(a) > 3", "-b == 1", "not -b", "len(a) == len(b) + len(a)"],
)
def test_a_rule_that_does_not_fit_its_values_is_one_expr_error(text):
    """Issue 64, item 10: len() of a number or the negation of text was a TypeError traceback."""
    with pytest.raises(expr.ExprError, match="cannot evaluate"):
        expr.evaluate(text, {"a": 8192, "b": "gemma"})
