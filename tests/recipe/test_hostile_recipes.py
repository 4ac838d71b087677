"""Small hostile recipes cannot take large memory or time: alias bombs and huge rule operands."""

import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cookbook.recipe import errors as E
from cookbook.recipe import expr, yaml_source

BOMB_LEVELS = "abcdefgh"


def alias_bomb(width: int = 9) -> str:
    """About 360 bytes that expand to width**8 strings if aliases are followed blindly."""
    lines = ["schema_version: 1", "name: bomb", "a: &a [" + ", ".join(['"x"'] * width) + "]"]
    for prev, cur in zip(BOMB_LEVELS, BOMB_LEVELS[1:]):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_quickly(tmp_path):
    path = tmp_path / "bomb" / "recipe.yaml"
    path.parent.mkdir()
    path.write_text(alias_bomb())
    assert path.stat().st_size < 400
    start = time.monotonic()
    with pytest.raises(E.RecipeError) as info:
        yaml_source.load(path)
    assert time.monotonic() - start < 5
    diag = info.value.diagnostics[0]
    assert diag.kind is E.YAML_SYNTAX and "expands to more than" in diag.problem


def test_alias_bomb_through_lint_exits_nonzero_with_one_message(tmp_path):
    path = tmp_path / "bomb" / "recipe.yaml"
    path.parent.mkdir()
    path.write_text(alias_bomb())
    p = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "lint", str(path)], capture_output=True, text=True, timeout=60
    )
    assert p.returncode != 0
    assert "R001" in p.stdout + p.stderr and "Traceback" not in p.stderr


def test_an_aliased_why_still_loads(tmp_path):
    # The seed recipes alias one `why` text across quants; that stays allowed.
    path = tmp_path / "recipe.yaml"
    path.write_text("schema_version: 1\nx: {why: &w 'shared reason'}\ny: {why: *w}\n")
    assert yaml_source.load(path).data["y"]["why"] == "shared reason"


@pytest.mark.parametrize("text", ["'x' * 999999999 == 'y'", "[0] * 10001 == []", "false and 'ab' * 100000 == ''"])
def test_huge_literal_operands_fail_to_parse(text):
    with pytest.raises(expr.ExprError, match="at most"):
        expr.parse(text)


def test_huge_values_built_from_keys_fail_to_evaluate():
    ctx = {"env": {"N": {"value": 10**9}}, "s": {"value": "x" * 6000}}
    with pytest.raises(expr.ExprError, match="at most"):
        expr.evaluate("'x' * env.N == ''", ctx)
    with pytest.raises(expr.ExprError, match="at most"):
        expr.evaluate("s + s == ''", ctx)
    assert expr.evaluate("len(s + 'y') == 6001", ctx) is True


_atoms = st.one_of(
    st.integers(-(10**6), 10**12).map(str),
    st.text(max_size=6).map(repr),
    st.sampled_from(["env.N", "s", "missing.key", "true", "null", "[1, 2]"]),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(_atoms, st.sampled_from(["*", "+", "-", "%", "/", "==", "<", "and", "in"])), min_size=1, max_size=6
    ),
    _atoms,
)
def test_any_expression_answers_a_value_or_one_expr_error(pairs, last):
    text = " ".join(f"{a} {op}" for a, op in pairs) + f" {last}"
    ctx = {"env": {"N": {"value": 10**9}}, "s": {"value": "x" * 50}}
    try:
        expr.evaluate(text, ctx)
    except expr.ExprError:
        pass


def test_a_fifo_named_as_a_recipe_is_refused_not_waited_on(tmp_path):
    import os

    fifo = tmp_path / "fifo" / "recipe.yaml"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    p = subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "lint", str(fifo)], capture_output=True, text=True, timeout=60
    )
    assert p.returncode != 0 and "not a regular file" in p.stdout + p.stderr


def test_a_recipe_that_is_not_utf8_is_one_message_with_its_position(tmp_path):
    path = tmp_path / "bad" / "recipe.yaml"
    path.parent.mkdir()
    path.write_bytes(b'schema_version: 1\nname: bad\nsummary: "\xff\xfe"\n')
    with pytest.raises(E.RecipeError) as info:
        yaml_source.load(path)
    d = info.value.diagnostics[0]
    assert d.kind is E.YAML_SYNTAX and "not UTF-8" in d.problem and (d.line, d.col) == (3, 11)


@pytest.mark.parametrize("text", [".inf", "-.inf", ".nan", "1.0e+400"])
def test_non_finite_numbers_in_a_recipe_are_refused_where_they_stand(tmp_path, text):
    path = tmp_path / "recipe.yaml"
    path.write_text(f"schema_version: 1\nserve:\n  args:\n    max_num_seqs: {text}\n")
    with pytest.raises(E.RecipeError) as info:
        yaml_source.load(path)
    d = info.value.diagnostics[0]
    assert "not a finite number" in d.problem and d.key == "serve.args.max_num_seqs" and d.line == 4


@pytest.mark.parametrize(
    "item,why",
    [
        ("serve.args.max_num_seqs=.inf", "not a finite number"),
        ("serve.args.x=[.nan]", "not a finite number"),
        ("serve.args.x=" + "[" * 20000, None),  # not YAML: kept as text, and text is fine
    ],
)
def test_set_values_that_cannot_be_settings_are_refused(item, why):
    from cookbook.recipe.overrides import parse_set

    if why is None:
        assert parse_set(item)[1] == item.split("=", 1)[1]
        return
    with pytest.raises(E.RecipeError, match=why):
        parse_set(item)


def test_a_set_value_alias_bomb_is_refused():
    from cookbook.recipe.overrides import parse_set

    levels = ["&a [1,1,1,1,1,1,1,1,1,1]"] + [f"&{c} [" + ",".join([f"*{p}"] * 10) + "]" for p, c in zip("abcd", "bcde")]
    item = "serve.args.x=[" + ", ".join(levels) + "]"
    with pytest.raises(E.RecipeError, match="more than"):
        parse_set(item)
