"""`cookbook lint` loads, merges and validates each recipe file once (the stale check of a
verified recipe reuses that resolution instead of resolving the file again)."""

import importlib
import shutil
from collections import Counter

import pytest

from cookbook.recipe import paths
from cookbook.recipe.lint import lint_file
from cookbook.recipe.model import Recipe

R = importlib.import_module("cookbook.recipe.chain")  # where the extends chain is loaded


@pytest.fixture
def counts(monkeypatch):
    loads: Counter = Counter()
    validations = Counter()
    real_load, real_validate = R.load, Recipe.model_validate.__func__

    def load(path):
        loads[path.resolve()] += 1
        return real_load(path)

    def model_validate(cls, data, *a, **kw):
        validations[data.get("name")] += 1
        return real_validate(cls, data, *a, **kw)

    monkeypatch.setattr(R, "load", load)
    monkeypatch.setattr(Recipe, "model_validate", classmethod(model_validate))
    return loads, validations


@pytest.mark.parametrize("slug", ["gemma3-270m-cpu", "glm52-4", "glm52-mxfp4-8x-gaudi2"])
def test_lint_resolves_each_file_once(counts, slug):
    loads, validations = counts
    # R015 (stale, a hint) until the gates run again on the recipe hash that covers the chat template
    assert {d.kind.id for d in lint_file(paths.recipe_file(slug))} <= {"R015"}
    assert loads and set(loads.values()) == {1}, loads  # the file and each recipe it extends
    assert validations == {slug: 1}


def test_stale_check_reuses_the_resolution(counts, tmp_path, monkeypatch):
    loads, validations = counts
    shutil.copytree(paths.recipes_dir() / "gemma3-270m-cpu", tmp_path / "gemma3-270m-cpu")
    monkeypatch.setenv("COOKBOOK_RECIPES", str(tmp_path))
    f = tmp_path / "gemma3-270m-cpu" / "recipe.yaml"
    f.write_text(f.read_text().replace("summary: Gemma 3 270M", "summary: Gemma 3 270M (edited)", 1))
    assert [d.kind.id for d in lint_file(f)] == ["R015"]  # stale, found without a second resolve
    assert set(loads.values()) == {1} and validations == {"gemma3-270m-cpu": 1}
