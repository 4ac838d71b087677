import pytest
from recipe_helpers import FIXTURES


@pytest.fixture
def valid_recipes(monkeypatch):
    monkeypatch.setenv("COOKBOOK_RECIPES", str(FIXTURES / "valid"))
    return FIXTURES / "valid"
