"""Shared paths and the golden-snapshot check of the recipe engine tests."""

import os
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "recipes"
SNAPSHOTS = Path(__file__).resolve().parents[1] / "recipe" / "snapshots"


def check_golden(name: str, text: str) -> None:
    """Compare with tests/recipe/snapshots/<name>; UPDATE_GOLDEN=1 rewrites it."""
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing snapshot {path}; run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from its snapshot (UPDATE_GOLDEN=1 to accept)"
