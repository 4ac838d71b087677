"""Imports run downward, and no module imports itself round a circle. Walks every module's
imports (top-level and inside functions) with ast, so a lazy import cannot slip an upward edge
or a circle past the rules.

    cli, commands              the CLI: nothing below imports them, and no command module imports another
    cli_options, generated_files   what the command modules share (click options, the generated-file
                               writer): only the CLI imports them
    site                       the generated docs pages: recipe, plan, fixes, evidence status; only the CLI imports it
    bisect                     the first engine release where a gate fails: through upgrade; only the CLI imports it
    upgrade                    moves an engine pin: serving, fixes, the evidence wing's verify, the recipe; only the CLI imports it
    evidence                   a bundle re-checked, `gates verify`, a recipe's status: gates + recipe; only the tiers above import it;
                               its engine check alone also asks the planner (the verified re-check never does)
    gates, serving, convert    use the recipe model, gguf, the engine (serving: also the plan)
    plan                       the memory planner: recipe, gguf, the safetensors reader; never gates, serving or the CLI
    image                      images: the recipe model and the fix pack; never gates or serving
    recipe (incl. gates_spec)  the recipe model and its resolution, the status words: never gates, evidence or the CLI
    gguf                       the GGUF format: never convert
    files, errors, untrusted, platforms, kernel_catalogue, mxfp4, engine, model_folder, ...   the bottom

Import cycles are refused between packages and between the modules of one package alike
(test_no_import_cycles), so two modules that need each other become one, or a third below both.
No module hands another package's functions down as callbacks (test_no_callback_forwarders): a
package that needs them sits above them, or what both need moves below both.
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
    "cookbook.plan": ("cookbook.gates", "cookbook.serving", "cookbook.kernels"),
    "cookbook.image": ("cookbook.gates", "cookbook.serving", "cookbook.convert"),
    "cookbook.evidence": (
        "cookbook.serving",
        "cookbook.convert",
        "cookbook.image",
        "cookbook.plan",
        "cookbook.kernels",
        "cookbook.fixes",
    ),
    "cookbook.files": ("cookbook.",),
    "cookbook.errors": ("cookbook.",),
    "cookbook.untrusted": ("cookbook.",),
    "cookbook.platforms": ("cookbook.",),
    "cookbook.units": ("cookbook.",),
    # the one model-folder writer sits at the bottom with files and errors, which it alone imports
    "cookbook.model_folder": tuple(
        f"cookbook.{p}"
        for p in ("recipe", "gates", "serving", "convert", "image", "plan", "evidence", "fixes", "commands", "site")
    ),
    "cookbook.upgrade": ("cookbook.bisect",),
    "cookbook.kernel_catalogue": ("cookbook.recipe", "cookbook.gates", "cookbook.kernels", "cookbook.serving"),
}
# module -> prefixes it may import although its package's rule above bans them. The engine check
# compares vLLM's figures with the plan, so it asks the planner itself (no planner handed down from
# above); the rest of the evidence wing, whose passes are cached by the gates' and its own source
# (cookbook.evidence.passed_cache), must not depend on the planner.
ALLOWED = {
    "cookbook.evidence.engine_check": ("cookbook.plan",),
    # whether its checkpoint fits a card: the planner's weights by tensor group, scaled to the depth
    "cookbook.evidence.engine_check_fit": ("cookbook.plan",),
}
CLI = ("cookbook.commands", "cookbook.cli")
CLI_SHARED = ("cookbook.cli_options", "cookbook.generated_files")  # below the commands, above the rest
UPPER = (
    "cookbook.bisect",
    "cookbook.upgrade",
    "cookbook.site",
)  # below the CLI, above the rest
EVIDENCE = ("cookbook.evidence",)  # below UPPER, above the gate suite, serving and the recipe
# Each tier is imported only from itself or a tier above it (earlier here).
TIERS = (CLI, CLI_SHARED, UPPER, EVIDENCE)


def _modules():
    for path in sorted((SRC / "cookbook").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        yield ".".join(parts), path, is_pkg


def _from_module(node: ast.ImportFrom, name: str, is_pkg: bool) -> str:
    """The module a `from ... import` statement in module `name` imports from (relative ones resolved)."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _import_statements(name: str, path: Path, is_pkg: bool):
    """(module, names imported from it) of every import statement; names are empty for `import m`."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, ()
        elif isinstance(node, ast.ImportFrom):
            yield _from_module(node, name, is_pkg), tuple(a.name for a in node.names)


def _ours(module: str) -> bool:
    return module == "cookbook" or module.startswith("cookbook.")


def _imports(name: str, path: Path, is_pkg: bool) -> set[str]:
    out = set()
    for module, names in _import_statements(name, path, is_pkg):
        out.add(module)
        out |= {f"{module}.{n}" for n in names}  # `from cookbook import gates`
    return {m for m in out if _ours(m)}


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
            allowed = ALLOWED.get(name, ())
            bad += [
                m
                for m in imports
                for b in banned
                if _within(m, b) and not _within(m, owner) and not any(_within(m, a) for a in allowed)
            ]
    # Nothing below a tier imports it; `python -m` entry points (__main__) are the CLI too.
    for i, tier in enumerate(TIERS):
        if any(_within(name, p) for above in TIERS[: i + 1] for p in above):
            continue
        if tier is CLI and name.endswith(".__main__"):
            continue
        bad += [m for m in imports if any(_within(m, p) for p in tier)]
    assert not bad, f"{name} imports {sorted(set(bad))} (imports run downward; see this test's docstring)"


NAMES = {m for m, _, _ in MODULES}


def _module_of(module: str) -> str | None:
    """The module (of this package) that an imported name lives in: itself, else its nearest parent."""
    while module not in NAMES and "." in module:
        module = module.rsplit(".", 1)[0]
    return module if module in NAMES else None


def _edges(name: str, path: Path, is_pkg: bool) -> set[str]:
    """The modules `name` imports (lazy ones too). `from p import x` imports the module p.x when
    there is one, else p (x is a name p's __init__ defines); the parent package a submodule import
    runs first is not counted, so `from p import x` inside package p is no circle."""
    out = set()
    for module, names in _import_statements(name, path, is_pkg):
        if not _ours(module):
            continue
        subs = {f"{module}.{n}" for n in names if f"{module}.{n}" in NAMES}
        if len(subs) < len(names) or not names:
            out.add(_module_of(module))
        out |= subs
    return out - {name, None}


GRAPH = {name: _edges(name, path, is_pkg) for name, path, is_pkg in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (a -> ... -> a) through each strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_circle(graph, group) for group in groups]


def _circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest way from the group's first module back to itself, inside the group (breadth first)."""
    start = min(group)
    came = {start: None}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v] & group):
            if w == start:
                path = [v]
                while came[path[-1]] is not None:
                    path.append(came[path[-1]])
                return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, v, start]
            if w not in came:
                came[w] = v
                todo.append(w)
    raise AssertionError(f"no circle in {sorted(group)}")


def test_the_cycle_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"} - {"e"}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"p": {"q"}, "q": {"p"}}) == [["p", "q", "p"]]
    assert "cookbook.recipe.errors" in GRAPH["cookbook.recipe.yaml_source"]  # `from cookbook.recipe import errors`
    assert "cookbook.recipe" not in GRAPH["cookbook.recipe.yaml_source"]


def test_no_import_cycles():
    found = [" -> ".join(c) for c in _cycles(GRAPH)]
    assert not found, "import cycles (turn one edge around, or move what both need below them):\n  " + "\n  ".join(
        found
    )


COMMANDS = "cookbook.commands"


def test_no_command_module_imports_another():
    """What two commands share lives below them (cookbook.cli_options, cookbook.generated_files, the
    packages), so a command module is read, changed and tested on its own."""
    bad = {
        name: sorted(m for m in edges if _within(m, COMMANDS) and m != COMMANDS)
        for name, edges in GRAPH.items()
        if _within(name, COMMANDS)
    }
    bad = {name: found for name, found in bad.items() if found}
    assert not bad, "command modules import other command modules (move what they share below them): " + str(bad)


BOTTOM = tuple(owner for owner, banned in FORBIDDEN.items() if banned == ("cookbook.",))


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _imported_names(nodes, name: str, is_pkg: bool) -> dict[str, str]:
    """name -> the module it was imported from, for every `from cookbook... import name` among `nodes`."""
    out = {}
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.ImportFrom) and _ours(module := _from_module(n, name, is_pkg)):
                out |= {a.asname or a.name: module for a in n.names}
    return out


def _returns_a_function(fn: ast.FunctionDef) -> bool:
    """fn returns (alone or in a tuple) a lambda, a function it defines, or what one of its own function
    factories makes (an imported name may be a constant: not counted)."""
    nested = {n.name: n for n in fn.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    factories = {k for k, v in nested.items() if _returns_a_function(v)}
    made = {
        n.targets[0].id
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and (
            isinstance(n.value, ast.Lambda)
            or isinstance(n.value, ast.Call)
            and isinstance(n.value.func, ast.Name)
            and n.value.func.id in factories
        )
    }

    def a_function(e: ast.AST) -> bool:
        if isinstance(e, ast.Lambda):
            return True
        if isinstance(e, ast.Name):
            return e.id in nested or e.id in made
        return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in factories

    for n in ast.walk(fn):
        if isinstance(n, ast.Return) and n.value is not None:
            values = n.value.elts if isinstance(n.value, ast.Tuple) else [n.value]
            if any(a_function(v) for v in values):
                return True
    return False


def callback_forwarders(name: str, tree: ast.Module, is_pkg: bool = False) -> list[str]:
    """The top-level functions of module `name` that return functions built on another package's
    (a lazy import of the planner wrapped in a closure, handed to a package that may not import it).
    A decorator or a factory over its own package's code, or over the bottom modules, is no forwarder."""
    module_names = _imported_names([n for n in tree.body if isinstance(n, ast.ImportFrom)], name, is_pkg)
    found = []
    for fn in tree.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        imported = module_names | _imported_names([fn], name, is_pkg)
        used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        foreign = {
            n
            for n in used
            if n in imported
            and _package(imported[n]) != _package(name)
            and not any(_within(imported[n], b) for b in BOTTOM)
        }
        if foreign and _returns_a_function(fn):
            found.append(f"{fn.name} (hands out {', '.join(sorted(foreign))})")
    return found


def test_the_callback_check_finds_a_forwarder():
    forwarder = ast.parse(
        "def tools(resolved):\n"
        "    from cookbook.plan.budget import make_plan\n"
        "    from cookbook.plan.launch_block import launch_block\n"
        "    def cached(kind, make):\n"
        "        def fn(sets):\n"
        "            return make(resolved, sets)\n"
        "        return fn\n"
        "    plan = cached('plan', lambda r, config=None: make_plan(r, gpus=1, config=config))\n"
        "    return plan, cached('block', launch_block)\n"
    )
    assert callback_forwarders("cookbook.status_tools", forwarder) == ["tools (hands out launch_block, make_plan)"]
    own = ast.parse(
        "from cookbook.untrusted import printable\ndef deco(fn):\n    def w():\n        return printable(fn())\n    return w\n"
    )
    assert callback_forwarders("cookbook.commands.convert", own) == []


def test_no_callback_forwarders():
    found = {
        name: hits
        for name, path, is_pkg in MODULES
        if (hits := callback_forwarders(name, ast.parse(path.read_text(encoding="utf-8")), is_pkg))
    }
    assert not found, (
        "modules that hand another package's functions down as callbacks (let the package that needs "
        f"them sit above them, or move what both need below both): {found}"
    )


def test_no_callbacks_are_handed_down_into_the_evidence_wing():
    """A lower tier asks what it needs itself (ALLOWED says where it may): none of the evidence wing's
    functions takes a callable from above (a parameter named *_fn or typed Callable), and no module
    exists only to hand such callables down (the removed cookbook.shown_status)."""
    found = []
    for name, path, _ in MODULES:
        if not _within(name, "cookbook.evidence"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                    typed = a.annotation is not None and "Callable" in ast.unparse(a.annotation)
                    if a.arg.endswith("_fn") or typed:
                        found.append(f"{name}.{node.name}({a.arg})")
    assert not found, f"callbacks handed into the evidence wing: {found}"
    assert "cookbook.shown_status" not in NAMES
