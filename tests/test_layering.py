"""Imports run downward. Walks every module's imports (top-level and inside functions) with
ast, so a lazy import cannot slip an upward edge past the rule.

    cli, commands              the CLI: nothing below imports them
    site                       the generated docs pages: recipe, plan, fixes, verification; only the CLI imports it
    bisect                     the first engine release where a gate fails: through upgrade; only the CLI imports it
    upgrade                    moves an engine pin: serving, fixes, gates' verify, the recipe; only the CLI imports it
    verification               a recipe's status with its bundle re-checked: recipe + gates
    gates, serving, convert    use the recipe model, gguf, the engine (serving: also the plan)
    plan                       the memory planner: recipe, gguf, the safetensors reader; never gates, serving or the CLI
    gates, serving, convert    use the recipe model, gguf, the engine
    image                      images: the recipe model and the fix pack; never gates or serving
    recipe (incl. gates_spec)  the recipe model and its resolution: never gates or the CLI
    gguf                       the GGUF format: never convert
    files, errors, untrusted, platforms, kernel_catalogue, mxfp4, engine, ...   the bottom
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# package prefix -> prefixes it must never import
FORBIDDEN = {
    "cookbook.recipe": ("cookbook.gates", "cookbook.serving", "cookbook.convert", "cookbook.kernels", "cookbook.plan"),
    "cookbook.gguf": ("cookbook.convert", "cookbook.recipe", "cookbook.gates", "cookbook.serving"),
    "cookbook.gates": ("cookbook.serving", "cookbook.convert"),
    "cookbook.plan": ("cookbook.gates", "cookbook.serving", "cookbook.kernels", "cookbook.verification"),
    "cookbook.image": ("cookbook.gates", "cookbook.serving", "cookbook.convert", "cookbook.verification"),
    "cookbook.files": ("cookbook.",),
    "cookbook.errors": ("cookbook.",),
    "cookbook.untrusted": ("cookbook.",),
    "cookbook.platforms": ("cookbook.",),
    "cookbook.upgrade": ("cookbook.bisect",),
    "cookbook.kernel_catalogue": ("cookbook.recipe", "cookbook.gates", "cookbook.kernels", "cookbook.serving"),
}
CLI = ("cookbook.commands", "cookbook.cli")
UPPER = ("cookbook.bisect", "cookbook.upgrade", "cookbook.site")  # below the CLI, above everything else


def _modules():
    for path in sorted((SRC / "cookbook").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        yield ".".join(parts), path, is_pkg


def _imports(name: str, path: Path, is_pkg: bool) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.add(module)
            out |= {f"{module}.{a.name}" for a in node.names}  # `from cookbook import gates`
    return {m for m in out if m == "cookbook" or m.startswith("cookbook.")}


def _within(module: str, prefix: str) -> bool:
    return module == prefix.rstrip(".") or module.startswith(prefix.rstrip(".") + ".")


MODULES = list(_modules())


def test_the_walk_sees_the_package():
    names = {m for m, _, _ in MODULES}
    assert {"cookbook.recipe.model", "cookbook.recipe.gates_spec", "cookbook.gguf.writer", "cookbook.cli"} <= names
    assert "cookbook.recipe.gates_spec" in _imports(*next(m for m in MODULES if m[0] == "cookbook.recipe.model"))


@pytest.mark.parametrize("name,path,is_pkg", MODULES, ids=[m[0] for m in MODULES])
def test_imports_run_downward(name, path, is_pkg):
    imports = _imports(name, path, is_pkg)
    bad = []
    for owner, banned in FORBIDDEN.items():
        if _within(name, owner):
            bad += [m for m in imports for b in banned if _within(m, b) and not _within(m, owner)]
    # Nothing below the CLI imports it; `python -m` entry points (__main__) are the CLI too.
    if not any(_within(name, c) for c in CLI) and not name.endswith(".__main__"):
        bad += [m for m in imports if any(_within(m, c) for c in CLI)]
    if not any(_within(name, u) for u in CLI + UPPER):
        bad += [m for m in imports if any(_within(m, u) for u in UPPER)]
    assert not bad, f"{name} imports {sorted(set(bad))} (imports run downward; see this test's docstring)"
