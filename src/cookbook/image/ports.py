"""The port of each engine family: ports/<family>/port.yaml names the engines it builds, its
Dockerfile and its named build inputs (what the documents describe but do not publish)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from cookbook.errors import CookbookError
from cookbook.files import repo_root

INPUTS_DIR = Path(".cache") / "image-inputs"  # where a user puts a port's build inputs


@dataclass(frozen=True)
class BuildInput:
    name: str
    what: str
    put: str
    platforms: tuple[str, ...] = ()  # empty: every platform

    def missing_message(self, family: str) -> str:
        return (
            f"error: build input {self.name} of ports/{family} is missing: {self.what}\n"
            f"  help: put it at {self.put}, then run `cookbook image` again\n"
        )


@dataclass(frozen=True)
class Port:
    family: str
    engines: tuple[str, ...]
    repos: tuple[str, ...]
    dockerfile: str
    wheels: bool
    inputs: tuple[BuildInput, ...]
    # The engine's own image at the recipe's pin ("{pin}" is filled in), when the port builds on it
    # rather than on the platform's base (docker/<folder>/base.yaml); empty for the others.
    base: str = ""
    base_why: str = ""  # how that base is pinned, and why
    built: str = ""  # where an image of this port was built and served, with its record; empty: never yet

    def base_for(self, pin: str | None) -> str | None:
        return self.base.replace("{pin}", pin) if self.base and pin else None

    @property
    def folder(self) -> str:
        return f"ports/{self.family}"


def _norm(text) -> str:
    return " ".join(str(text or "").split())


def load(family: str, root: Path | None = None) -> Port:
    from cookbook.recipe.checks_paths import PORT_HELP, port_problem
    from cookbook.untrusted import printable

    root = root or repo_root()
    why = port_problem(root, family)
    if why:
        raise CookbookError(f"image.port: ports/{printable(family[:200])}/ {why}", help=PORT_HELP)
    path = root / "ports" / family / "port.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CookbookError(f"cannot read {path}: {exc}", help="every ports/<family>/ holds a port.yaml") from None
    if not isinstance(data, dict) or not data.get("engines") or not data.get("dockerfile"):
        raise CookbookError(f"{path}: needs engines and dockerfile", help="see ports/cpu/port.yaml")
    inputs = tuple(
        BuildInput(i["name"], _norm(i["what"]), _norm(i["put"]), tuple(i.get("platforms") or ()))
        for i in data.get("inputs") or ()
    )
    return Port(
        family=family,
        engines=tuple(data["engines"]),
        repos=tuple(data.get("repos") or ()),
        dockerfile=data["dockerfile"],
        wheels=bool(data.get("wheels")),
        inputs=inputs,
        base=str(data.get("base") or ""),
        base_why=_norm(data.get("base_why")),
        built=_norm(data.get("built")),
    )


def all_ports(root: Path | None = None) -> list[Port]:
    root = root or repo_root()
    return [load(p.parent.name, root) for p in sorted((root / "ports").glob("*/port.yaml"))]


def for_recipe(recipe, root: Path | None = None) -> Port:
    """The recipe's image.port when it names one, else the one port that builds its engine
    (and, for a fork of plain vllm, its engine repository)."""
    if recipe.image.port:
        return load(recipe.image.port, root)
    engine = recipe.image.engine
    found = [
        p
        for p in all_ports(root)
        if engine.package in p.engines and (not p.repos or (engine.repo or "").rstrip("/") in p.repos)
    ]
    if len(found) != 1:
        raise CookbookError(
            f"{recipe.name}: no port builds engine {engine.package}" + (f" from {engine.repo}" if engine.repo else ""),
            help="add the engine to a ports/<family>/port.yaml, or set image.port in the recipe",
        )
    return found[0]
