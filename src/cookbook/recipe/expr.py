"""The rule language: small, safe expressions over a resolved recipe.

Grammar (a subset of Python expressions, parsed with `ast`, never `eval`):
  dotted keys      serve.args.block_size, quant.min_gpus, hardware.gpus, env.GLM_MXK
  literals         1, 0.86, "fp8", true/false/null (also True/False/None)
  operators        == != < <= > >= in, not in, and, or, not, + - * / %
  functions        defined(x)  (the key exists), len(x), lower(x), version(x) (a release, PEP 440, that
                   compares as one: version(image.engine.version) >= version('0.27.1'))
A key the recipe does not have, or sets to null (no flag), is *missing*: it equals only null, is never <, >, in;
`defined(key)` tests for it. Settings written as {value, why} evaluate to their value.

In a rule's message and help, {dotted.key} is filled with the key's value when the rule
fires, and {dotted.key.why} quotes that setting's why (the reason is written once, on the
setting; e.g. message: "--block-size {serve.args.block_size}: {serve.args.block_size.why}.").
"""

from __future__ import annotations

import ast
import operator
from typing import Any


class ExprError(ValueError):
    pass


class _Missing:
    def __repr__(self) -> str:
        return "missing"

    def __bool__(self) -> bool:
        return False


MISSING = _Missing()

_CMP = {
    ast.Eq: lambda a, b: (a is MISSING and b is None) or (b is MISSING and a is None) or a == b,
    ast.NotEq: None,  # defined below as the negation of Eq
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_ARITH = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
}
_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_FUNCS = {"defined", "len", "lower", "version"}
MAX_EXPR_CHARS = 2000
# Largest string or list an operator may build ('x' * 999999999 would take a GiB).
MAX_VALUE_LEN = 10_000


def parse(text: str) -> ast.Expression:
    if len(text) > MAX_EXPR_CHARS:
        raise ExprError(f"expression longer than {MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse {text!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        allowed = (
            ast.Expression,
            ast.BoolOp,
            ast.And,
            ast.Or,
            ast.UnaryOp,
            ast.Not,
            ast.USub,
            ast.Compare,
            ast.BinOp,
            ast.Name,
            ast.Attribute,
            ast.Constant,
            ast.Load,
            ast.Call,
            ast.List,
            ast.Tuple,
            *_CMP,
            *_ARITH,
        )
        if not isinstance(node, allowed):
            raise ExprError(f"{type(node).__name__} is not allowed in a rule expression ({text!r})")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or len(node.args) != 1:
                raise ExprError(f"only defined(x), len(x), lower(x) and version(x) may be called ({text!r})")
        if isinstance(node, ast.BinOp) and all(isinstance(v, _LITERALS) for v in (node.left, node.right)):
            # Literal operands are checked here too: a branch that never runs must still lint.
            _check_size(node, _literal(node.left), _literal(node.right))
    return tree


def dotted_name(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def lookup(context: dict[str, Any], dotted: str, unwrap: bool = True) -> Any:
    """The value at a dotted key, or MISSING. With unwrap, a {value, why} setting is its value."""
    value: Any = context
    for part in dotted.split(".") if dotted else []:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
        if unwrap and isinstance(value, dict) and "value" in value and set(value) <= {"value", "why", "source"}:
            value = value["value"]
    return value


def evaluate(text: str, context: dict[str, Any]) -> Any:
    try:
        return _eval(parse(text).body, context)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        # len() of a number, -"text", a comparison past int-string limits: the values do not fit the rule
        raise ExprError(f"cannot evaluate {text[:200]!r} on these values: {exc}") from None


def _eval(node: ast.AST, ctx: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = dotted_name(node)
        if name is None:
            raise ExprError("attribute access is only allowed on dotted keys")
        value = lookup(ctx, name)
        return MISSING if value is None else value  # a null setting renders no flag: the key is unset
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, ctx) for e in node.elts]
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, ctx) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, ctx)
        if isinstance(node.op, ast.Not):
            return not value
        return MISSING if value is MISSING else -value
    if isinstance(node, ast.Call):
        fn = node.func.id  # type: ignore[union-attr]
        value = _eval(node.args[0], ctx)
        if fn == "defined":
            return value is not MISSING
        if value is MISSING:
            return MISSING
        if fn == "version":
            return _version(value, dotted_name(node.args[0]))
        return len(value) if fn == "len" else str(value).lower()
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, ctx), _eval(node.right, ctx)
        if left is MISSING or right is MISSING:
            return MISSING
        _check_size(node, left, right)
        if isinstance(node.op, ast.Mod) and isinstance(left, str):
            raise ExprError(f"cannot compute {ast.unparse(node)}: % is arithmetic, not string formatting")
        try:
            return _ARITH[type(node.op)](left, right)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
            raise ExprError(f"cannot compute {ast.unparse(node)}: {exc}") from None
    if isinstance(node, ast.Compare):
        left = _eval(node.left, ctx)
        for op, comparator in zip(node.ops, node.comparators):
            right = _eval(comparator, ctx)
            if not _compare(op, left, right):
                return False
            left = right
        return True
    raise ExprError(f"unsupported expression {ast.unparse(node)}")


_LITERALS = (ast.Constant, ast.List, ast.Tuple)


def _version(value: Any, key: str | None):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(str(value))
    except InvalidVersion:
        what = f"{key} is {value!r}" if key else f"version({value!r})"
        raise ExprError(f"{what}: not a release number such as 0.27.1") from None


def _literal(node: ast.AST) -> Any:
    """A literal operand as far as its size goes (a list literal's items are not needed)."""
    return node.value if isinstance(node, ast.Constant) else [None] * len(node.elts)


def _size(value: Any) -> int:
    if isinstance(value, (str, list)):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value)
    return 0


def _check_size(node: ast.BinOp, left: Any, right: Any) -> None:
    """Refuse a string or list result over MAX_VALUE_LEN before building it."""
    sequences = [v for v in (left, right) if isinstance(v, (str, list))]
    if not sequences:
        return
    size = _size(left) * _size(right) if isinstance(node.op, ast.Mult) else _size(left) + _size(right)
    if size > MAX_VALUE_LEN:
        raise ExprError(
            f"{ast.unparse(node)} would build a value of {size} items; "
            f"a rule expression's values are at most {MAX_VALUE_LEN}"
        )


def _compare(op: ast.cmpop, left: Any, right: Any) -> bool:
    if isinstance(op, ast.Eq):
        return _CMP[ast.Eq](left, right)
    if isinstance(op, ast.NotEq):
        return not _CMP[ast.Eq](left, right)
    if left is MISSING or right is MISSING:
        return False
    try:
        return bool(_CMP[type(op)](left, right))
    except TypeError:
        return False


def names(text: str) -> list[str]:
    """Dotted keys an expression reads, in order (for lint and for `show`)."""
    out: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Attribute, ast.Name)):
            name = dotted_name(node)
            if name and name not in _NAMES:
                out.append(name)
            return  # the chain's inner nodes are part of this key
        if isinstance(node, ast.Call):
            for arg in node.args:
                visit(arg)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(parse(text).body)
    return out
