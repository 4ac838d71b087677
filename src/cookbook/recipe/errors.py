"""Every diagnostic the recipe engine can emit, with a stable ID.

The docstring-like `doc` of each entry is the documentation: `cookbook docs` generates
docs/errors.md from this table (cookbook.site.errors_page), and a test checks the IDs are unique and documented.
IDs never change meaning; retired IDs stay listed with `retired=True`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cookbook.errors import CookbookError


@dataclass(frozen=True)
class ErrorKind:
    id: str
    title: str
    doc: str  # what is wrong, why it matters, how to fix
    level: str = "error"  # error | hint
    retired: bool = False


REGISTRY: dict[str, ErrorKind] = {}


def _kind(id: str, title: str, doc: str, level: str = "error") -> ErrorKind:
    assert id not in REGISTRY, f"duplicate error id {id}"
    kind = ErrorKind(id, title, doc, level)
    REGISTRY[id] = kind
    return kind


YAML_SYNTAX = _kind(
    "R001",
    "YAML syntax error",
    "The file is not valid YAML. Fix the syntax at the reported line; a tab used for "
    "indentation and an unclosed quote are the usual causes.",
)
NOT_A_MAPPING = _kind(
    "R002",
    "recipe is not a mapping",
    "A recipe file must hold one YAML mapping at the top level (keys such as "
    "schema_version, name, model). Start from an existing recipe under recipes/.",
)
SCHEMA_VERSION = _kind(
    "R003",
    "missing or unsupported schema_version",
    "Every recipe states `schema_version: 1` so that a future format change can be "
    "detected instead of misread. Add `schema_version: 1` as the first key.",
)
UNKNOWN_KEY = _kind(
    "R004",
    "unknown key",
    "The key is not part of the recipe schema, so it would be silently ignored. Check the "
    "spelling against the help line (the legal keys at that place), or schema/recipe.schema.json.",
)
MISSING_KEY = _kind(
    "R005", "missing required key", "The schema requires this key. Add it, or extend a recipe that defines it."
)
BAD_VALUE = _kind(
    "R006",
    "invalid value",
    "The value has the wrong type or is outside the allowed values. The help line lists what is accepted.",
)
NAME_MISMATCH = _kind(
    "R007",
    "name differs from folder",
    "A recipe's `name` must equal its folder name (recipes/<name>/recipe.yaml): the path "
    "is the recipe's identity. Rename the folder or the name.",
)
EXTENDS_UNKNOWN = _kind(
    "R008",
    "extends an unknown recipe",
    "`extends` must name another recipe folder under recipes/. Run `cookbook list` to see them.",
)
EXTENDS_CYCLE = _kind(
    "R009", "extends cycle", "Recipes extend each other in a loop, so none can be resolved. Break the loop."
)
BAD_EXPRESSION = _kind(
    "R010",
    "invalid rule expression",
    "A rule's `when`/`require` expression does not parse or uses something the rule language "
    "does not allow. See docs/rules.md for the grammar: dotted keys, literals, comparisons, "
    "and/or/not, in, defined(x).",
)
DEFAULT_REFUSED = _kind(
    "R011",
    "the recipe's own default is refused",
    "Resolving the recipe with its defaults breaks one of its own rules, so its launch block "
    "could never be used. Fix the setting or the rule.",
)
QUANT_DEFAULTS = _kind(
    "R012", "quant defaults", "A recipe with quant options must mark exactly one of them `default: true`."
)
UNKNOWN_PLATFORM = _kind(
    "R013", "unknown platform", "hardware.platform must be an id from the platform catalogue. The help line lists them."
)
UNKNOWN_FIX = _kind(
    "R014",
    "unknown fix profile or fix",
    "image.fixes names a profile or opt-in fix the fix pack does not have. "
    "See fixes/profiles/ for the profiles and their fixes.",
)
STALE_VERIFIED = _kind(
    "R015",
    "verified block is stale",
    "The recipe changed after its gates passed: the recorded recipe_hash no longer matches the "
    "resolved recipe. Run the gates again (gates/run.sh) and `cookbook gates verify`.",
    "hint",
)
UNKNOWN_KERNEL = _kind(
    "R016",
    "unknown kernel or kernel variant",
    "An image.kernels entry names a kernel that is not a folder under kernels/ with an entry in "
    "the kernel catalogue (cookbook/kernel_catalogue.py), or a variant that kernel does not have. "
    "The help line lists the kernels or the variants.",
)
KERNEL_NO_BACKEND = _kind(
    "R017",
    "kernel has no backend for the platform",
    "Each kernel has one backend per platform arch (mxfp4-moe: sm90 for NVIDIA Hopper, hpu for "
    "Gaudi), and the recipe's hardware.platform picks it. This platform has none, so the image's "
    "kernel step could only build a kernel that does not run there. Drop the entry, or use a recipe "
    "on a platform the help line names.",
)
MISSING_PATH = _kind(
    "R018",
    "path not in this repository",
    "image.dockerfile must be a file of this repository and image.port a folder ports/<port>/. "
    "A Dockerfile in the engine's own repository (a fork) goes under image.engine.dockerfile; one "
    "that nobody has written yet is left out (do not point at it, and do not add a stub).",
)
ENGINE_DOCKERFILE_NO_REPO = _kind(
    "R019",
    "engine Dockerfile without an engine repository",
    "image.engine.dockerfile names a file of the engine's own repository, so image.engine.repo must "
    "say which repository that is.",
)
UNEARNED_VERIFIED = _kind(
    "R020",
    "verified block not backed by its bundle",
    "The verified block's recipe_hash is current, but the evidence bundle it names is missing or "
    "fails the re-check of `cookbook gates verify` (a file edited, added or removed after the run, "
    "no manifest.json, an environment lock or resolved recipe that does not match, or figures that "
    "recomputed from the transcripts disagree with results.json or miss the recipe's thresholds). "
    "The status is then `unverified (bundle missing)` or `unverified (bundle refused)`. Run the "
    "gates again and `cookbook gates verify RECIPE BUNDLE`, which lists every reason.",
    "hint",
)
BAD_NAME = _kind(
    "R021",
    "name not allowed in a launch block",
    "Names are rendered into the launch block as they are, so each kind has a fixed form: an "
    "environment variable name is letters, digits and _ (not starting with a digit); a serve.args "
    "key is letters, digits, _ and - (not starting with -); quant, fix profile and opt-in fix names "
    "are letters, digits and _ . + - (not starting with - or .); a converter tool and `extends` are "
    "lowercase letters, digits and -. Rename the key to that form.",
)
SHELL_CONTROL_CHAR = _kind(
    "R022",
    "control character in a rendered value",
    "A value that is rendered into the launch block (or the summary comment above it) holds a "
    "control character: a newline, tab, escape sequence, or a bidi or line-separator mark. A "
    "newline would end the comment or the command and run the rest as shell; the others make "
    "what a terminal shows differ from what runs. Write the value on one line without them; "
    "use `>-` folding in YAML for long text.",
)
NO_GATES = _kind(
    "R023",
    "recipe declares no gate",
    "A recipe says verified only when its gate suite passed, so a recipe that declares no gate could "
    "never be verified. Declare the gates its source document verified it with under `gates:` (each "
    "threshold with its source in calibrated_on). A benchmark-only recipe (dummy weights) says so "
    "instead, with `gates.benchmark_only: <why>`; it is shown as 'benchmark' and never verified.",
)
BENCHMARK_VERIFIED = _kind(
    "R024",
    "benchmark-only recipe with a verified block",
    "gates.benchmark_only marks a recipe whose answers mean nothing (dummy weights), so it can never "
    "be verified; remove its `verified:` block, or drop benchmark_only if the recipe serves a real model.",
)
UNUSABLE_FILE = _kind(
    "R025",
    "a file the recipe serves with cannot be used",
    "A value of serve, convert or env names a file of the checkout ($COOKBOOK/<path>, or the path an "
    "image copies the checkout to), and that file is part of the recipe's content hash. It must be a "
    "regular file inside the checkout (no `..` or link leading out), named without shell variables, "
    "and at most 16 MiB. Fix the path, or add the file to the checkout.",
)
UNKNOWN_RECIPE = _kind(
    "R101",
    "unknown recipe",
    "No folder recipes/<slug>/recipe.yaml exists for the requested slug. The help line lists "
    "the closest recipes; `cookbook list` shows all.",
)
UNKNOWN_QUANT = _kind(
    "R102", "unknown quant", "The recipe does not offer this quant. The help line lists the quants it offers."
)
QUANT_TOO_FEW_GPUS = _kind(
    "R103",
    "quant needs more GPUs",
    "The chosen quant does not fit on this recipe's GPU count. Use a recipe with more GPUs "
    "(the help line names them) or a smaller quant.",
)
UNKNOWN_SET_KEY = _kind(
    "R104",
    "--set names an unknown key",
    "`--set key=value` may only change keys the recipe has (or legal schema keys). Use the "
    "dotted path shown by `cookbook show`, e.g. serve.args.max_model_len.",
)
BAD_SET = _kind(
    "R105",
    "--set is malformed or its value is invalid",
    "Write `--set dotted.key=value`; the value is parsed as YAML (true, 8, 0.9, text).",
)
RULE_REFUSED = _kind(
    "R106",
    "refused by a recipe rule",
    "The requested configuration breaks a rule the source documents state. The message "
    "quotes the document's reason; the help line names what would work.",
)
ABSTRACT_RECIPE = _kind(
    "R107",
    "abstract recipe",
    "This recipe is a base for variants and is not launched by itself. Use one of its variants.",
)


@dataclass
class Diagnostic:
    kind: ErrorKind
    key: str  # dotted path, "" for the whole file
    problem: str
    help: str | None = None
    file: Path | None = None
    line: int | None = None  # 1-based
    col: int | None = None  # 1-based

    def render(self, root: Path | None = None) -> str:
        where = ""
        if self.file is not None:
            path = self.file
            if root is not None:
                try:
                    path = self.file.resolve().relative_to(root.resolve())
                except ValueError:
                    pass
            where = f"{path}:{self.line or 1}:{self.col or 1}: "
        key = f" {self.key}" if self.key else ""
        text = f"{where}{self.kind.id}{key}: {self.problem}"
        if self.help:
            text += f"\n  help: {self.help}"
        return text


class RecipeError(CookbookError):
    """One or more diagnostics that stop a command; rendered all at once (exit 2).

    Printed as `error: <action>` (what was refused, when a command says so) and then every
    diagnostic, its file relative to the checkout root.
    """

    def __init__(self, diagnostics: list[Diagnostic] | None = None, action: str | None = None):
        self.diagnostics = list(diagnostics or [])
        self.action = action
        super().__init__(action or "")

    def refusing(self, action: str) -> RecipeError:
        """The same diagnostics, printed under `error: <action>`."""
        return RecipeError(self.diagnostics, action)

    def format_message(self) -> str:
        from cookbook.files import repo_root

        lines = [d.render(repo_root()) for d in self.diagnostics]
        return "\n".join(([self.action] if self.action else []) + lines)

    def __str__(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)
