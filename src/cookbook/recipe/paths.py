"""Where things live in a checkout. One place for every path the tool relies on."""

from __future__ import annotations

import os
from pathlib import Path

from cookbook.files import repo_root  # noqa: F401  (the one repo_root; paths.repo_root() reads on)


def recipes_dir() -> Path:
    return Path(os.environ.get("COOKBOOK_RECIPES", repo_root() / "recipes"))


def recipe_file(slug: str) -> Path:
    return recipes_dir() / slug / "recipe.yaml"


def schema_file() -> Path:
    return repo_root() / "schema" / "recipe.schema.json"
