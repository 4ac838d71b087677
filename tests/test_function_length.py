"""No function of the package runs over 100 lines (the kernels aside: generated-style numeric code
measured against its reference). A long function is split into named steps; the allow-list holds only
functions in files another piece of work owns right now."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cookbook"
LIMIT = 100
# "path:function" -> why it may stay long for now
ALLOWED: dict[str, str] = {}


def long_functions(root: Path = SRC, limit: int = LIMIT) -> dict[str, int]:
    """'path:function' -> lines, for every function (methods and nested ones too) over `limit` lines."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("kernels/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # from `def` (a click command's options aside)
                if lines > limit:
                    out[f"{rel}:{node.name}"] = lines
    return out


def test_no_function_runs_over_100_lines():
    found = {k: v for k, v in long_functions().items() if k not in ALLOWED}
    assert not found, f"functions over {LIMIT} lines (split them into named steps): {found}"


def test_the_allow_list_holds_only_long_functions():
    found = long_functions()
    stale = sorted(k for k in ALLOWED if k not in found)
    assert not stale, f"no longer over {LIMIT} lines (or gone): remove from ALLOWED: {stale}"


def test_the_check_counts_from_def_and_sees_nested_functions(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(100))
    nested = body.replace("    ", "        ")
    (tmp_path / "m.py").write_text(f"@decorator\ndef f():\n{body}\n\n\ndef g():\n    def h():\n{nested}\n")
    assert long_functions(tmp_path) == {"m.py:f": 101, "m.py:g": 102, "m.py:h": 101}
    assert long_functions(tmp_path, limit=102) == {}
