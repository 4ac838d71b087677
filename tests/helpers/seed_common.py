"""Constants of the seed-recipe tests (a uniquely named module: `conftest` is ambiguous across test folders)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Every configuration of the three seed documents (issue 3), by recipe slug.
SEED_RECIPES = [
    "glm52-2",
    "glm52-4",
    "glm52-8",
    "glm52-4-a100",
    "glm52-8-a100",
    "dsv4-2",
    "dsv4-4",
    "k3-6",
    "k3-8",
    "glm52-nvfp4-4x-rtxpro6000",
    "glm52-nvfp4-4x-rtxpro6000-tp4-1m",
    "glm52-nvfp4-4x-rtxpro6000-tp4-dspark",
    "glm52-mxfp4-8x-gaudi2",
    "glm52-4-agentic",  # the document's example configurations (issue 65)
    "glm52-8-eval",
]
SEED_BASES = ["glm52-base", "glm52-a100-base", "dsv4-base", "k3-base"]


def seeds_dir() -> Path | None:
    """The seed documents: $COOKBOOK_SEEDS, else ../shared/seeds beside the checkout."""
    for cand in (os.environ.get("COOKBOOK_SEEDS"), ROOT.parent / "shared" / "seeds"):
        if cand and Path(cand).is_dir():
            return Path(cand)
    return None
