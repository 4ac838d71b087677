"""Fixtures of the seed-recipe tests."""

import pytest
from seed_common import seeds_dir


@pytest.fixture
def seed_text():
    def read(prefix: str) -> str:
        d = seeds_dir()
        if d is None:
            pytest.skip("seed documents not found: set COOKBOOK_SEEDS to the folder holding 000_*.txt .. 002_*.txt")
        files = sorted(d.glob(f"{prefix}_*.txt"))
        if not files:
            pytest.skip(f"no seed {prefix}_*.txt in {d}")
        return files[0].read_text()

    return read
