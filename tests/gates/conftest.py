"""Gate-suite fixtures: a copy of the test recipe in a temporary recipes folder."""

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture
def recipes_dir(tmp_path, monkeypatch):
    """tmp recipes/ holding gates-cpu (writable, since verify edits recipe.yaml)."""
    root = tmp_path / "recipes"
    shutil.copytree(FIXTURES / "recipes", root)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(root))
    return root


@pytest.fixture
def data_dir():
    if not (DATA_DIR / "gsm8k" / "test.jsonl").is_file():
        pytest.skip(f"gate data not found at {DATA_DIR} (set up ../shared/data; see gates/README.md)")
    return DATA_DIR
