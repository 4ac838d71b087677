"""Where things live in a checkout. One place for every path the tool relies on."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The checkout root: $COOKBOOK_ROOT, else the nearest parent holding recipes/."""
    env = os.environ.get("COOKBOOK_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "recipes").is_dir() and (parent / "pyproject.toml").is_file():
            return parent
    return Path.cwd()


def recipes_dir() -> Path:
    return Path(os.environ.get("COOKBOOK_RECIPES", repo_root() / "recipes"))


def recipe_file(slug: str) -> Path:
    return recipes_dir() / slug / "recipe.yaml"


def schema_file() -> Path:
    return repo_root() / "schema" / "recipe.schema.json"
