"""Load a recipe YAML file keeping the line and column of every key.

Positions let lint say `file:line:col` for a dotted key. Duplicate keys are an error
(YAML's last-one-wins would silently drop a setting).
"""

from __future__ import annotations

import copy
import functools
import math
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cookbook.recipe import errors as E

MAX_RECIPE_BYTES = 1 << 20  # a recipe is text written by people; 1 MiB is plenty
# Values after expanding YAML aliases. Recipes alias a shared `why` text; nested aliases of
# lists (a "billion laughs" file of a few hundred bytes) would otherwise expand without end.
MAX_RECIPE_VALUES = 100_000
# libyaml's parser when PyYAML has it (10x faster; `cookbook list` parses every recipe).
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class SourceFile:
    path: Path
    data: dict[str, Any]
    # dotted key -> (line, col), both 1-based
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)

    def where(self, key: str) -> tuple[int, int]:
        """Position of `key`, or of its nearest ancestor present in the file."""
        parts = key.split(".") if key else []
        while parts:
            pos = self.positions.get(".".join(parts))
            if pos:
                return pos
            parts.pop()
        return (1, 1)


class _Budget:
    """Counts values built from the node graph, so aliases cannot multiply the work."""

    def __init__(self, path: Path):
        self.left, self.path = MAX_RECIPE_VALUES, path

    def take(self, node: yaml.Node) -> None:
        self.left -= 1
        if self.left < 0:
            raise E.RecipeError(
                [
                    E.Diagnostic(
                        E.YAML_SYNTAX,
                        "",
                        f"the file expands to more than {MAX_RECIPE_VALUES} values",
                        "YAML aliases (*name) of lists or mappings nest here; write the values out or use `extends`",
                        self.path,
                        node.start_mark.line + 1,
                        node.start_mark.column + 1,
                    )
                ]
            )


def _construct(node: yaml.Node, prefix: str, positions: dict, path: Path, budget: _Budget | None = None) -> Any:
    budget = budget or _Budget(path)
    budget.take(node)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            dotted = f"{prefix}.{key}" if prefix else key
            if key in out:
                raise E.RecipeError(
                    [
                        E.Diagnostic(
                            E.YAML_SYNTAX,
                            dotted,
                            f"duplicate key {key!r}",
                            "remove one of the two; YAML would silently keep only the last",
                            path,
                            key_node.start_mark.line + 1,
                            key_node.start_mark.column + 1,
                        )
                    ]
                )
            positions[dotted] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = _construct(value_node, dotted, positions, path, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            dotted = f"{prefix}.{i}" if prefix else str(i)
            positions[dotted] = (item.start_mark.line + 1, item.start_mark.column + 1)
            items.append(_construct(item, dotted, positions, path, budget))
        return items
    # Scalars: let the safe loader's resolver type them (int, float, bool, null, str).
    try:
        value = _scalar(node)
    except ValueError:  # an integer past Python's int-string digit limit (4,300 digits)
        raise E.RecipeError(
            [
                E.Diagnostic(
                    E.YAML_SYNTAX,
                    prefix,
                    f"a number of {len(str(node.value)):,} digits is past any setting's range",
                    "write the number the setting needs",
                    path,
                    node.start_mark.line + 1,
                    node.start_mark.column + 1,
                )
            ]
        ) from None
    if isinstance(value, float) and not math.isfinite(value):
        # .inf, .nan or a literal past float range (1e400): no setting means that.
        raise E.RecipeError(
            [
                E.Diagnostic(
                    E.YAML_SYNTAX,
                    prefix,
                    f"{node.value!r} is not a finite number",
                    "write the number the setting needs",
                    path,
                    node.start_mark.line + 1,
                    node.start_mark.column + 1,
                )
            ]
        )
    return value


def _scalar(node: yaml.ScalarNode) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def load(path: Path) -> SourceFile:
    """Parse `path`; raise RecipeError (R001/R002) with a position on failure.
    Parsed files are cached per process by (path, size, mtime); callers get a copy."""
    try:
        st = path.stat()
    except OSError as exc:
        raise E.RecipeError(
            [E.Diagnostic(E.UNKNOWN_RECIPE, "", f"cannot read {path}: {exc.strerror}", None, path)]
        ) from None
    src = _load_cached(path.resolve(), st.st_size, st.st_mtime_ns)
    return SourceFile(path, copy.deepcopy(src.data), src.positions)


@functools.lru_cache(maxsize=256)
def _load_cached(path: Path, size: int, mtime_ns: int) -> SourceFile:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise E.RecipeError(
            [E.Diagnostic(E.UNKNOWN_RECIPE, "", f"cannot read {path}: {exc.strerror}", None, path)]
        ) from None
    if not stat.S_ISREG(path.stat().st_mode):
        # A FIFO or device would block or never end; a recipe is a plain file.
        raise E.RecipeError(
            [
                E.Diagnostic(
                    E.UNKNOWN_RECIPE,
                    "",
                    f"{path} is not a regular file",
                    "point at a recipes/<slug>/recipe.yaml file",
                    path,
                )
            ]
        )
    if size > MAX_RECIPE_BYTES:
        raise E.RecipeError(
            [
                E.Diagnostic(
                    E.YAML_SYNTAX, "", f"file is {size} bytes; a recipe is at most {MAX_RECIPE_BYTES}", None, path
                )
            ]
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise E.RecipeError(
            [
                E.Diagnostic(
                    E.YAML_SYNTAX,
                    "",
                    f"byte 0x{raw[exc.start]:02x} at offset {exc.start} is not UTF-8",
                    "save the recipe as UTF-8 text",
                    path,
                    line,
                    col,
                )
            ]
        ) from None
    try:
        node = yaml.compose(text, Loader=LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise E.RecipeError(
            [E.Diagnostic(E.YAML_SYNTAX, "", problem, "fix the YAML syntax at this position", path, line, col)]
        ) from None
    except yaml.YAMLError as exc:  # ReaderError: a NUL or other control character YAML refuses
        at = getattr(exc, "position", 0) or 0
        line, col = text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1
        char = getattr(exc, "character", "")
        problem = f"character {char!r} is not allowed in YAML" if char else str(exc).splitlines()[0]
        raise E.RecipeError(
            [E.Diagnostic(E.YAML_SYNTAX, "", problem, "remove the control character", path, line, col)]
        ) from None
    if not isinstance(node, yaml.MappingNode):
        raise E.RecipeError(
            [
                E.Diagnostic(
                    E.NOT_A_MAPPING,
                    "",
                    "the file does not hold a mapping",
                    "start from an existing recipes/<slug>/recipe.yaml",
                    path,
                )
            ]
        )
    positions: dict[str, tuple[int, int]] = {}
    data = _construct(node, "", positions, path)
    return SourceFile(path, data, positions)
