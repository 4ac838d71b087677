"""Gate-suite fixtures: a copy of the test recipe in a temporary recipes folder."""

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def recipes_dir(tmp_path, monkeypatch):
    """tmp recipes/ holding gates-cpu (writable, since verify edits recipe.yaml)."""
    root = tmp_path / "recipes"
    shutil.copytree(FIXTURES / "recipes", root)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(root))
    return root


@pytest.fixture
def data_dir():
    """The gate data where `cookbook serve` looks for it: $COOKBOOK_DATA, else ../shared/data."""
    from cookbook.commands.serve import default_data_dir
    found = default_data_dir()
    if found is None or not (found / "gsm8k" / "test.jsonl").is_file():
        pytest.skip(f"gate data not found at {found or '../shared/data'} "
                    "(set $COOKBOOK_DATA or set up ../shared/data; see gates/README.md)")
    return found
