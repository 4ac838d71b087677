"""The generated schema (schema/recipe.schema.json), applied by jsonschema as an editor would,
accepts every real recipe and every valid fixture: each file as written (a variant's file
holds only what it changes, so `required` is not asked of it) and each merged `extends` chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator
from recipe_helpers import FIXTURES

from cookbook.recipe import paths
from cookbook.recipe.chain import load_chain, merge_chain

SCHEMA = json.loads(paths.schema_file().read_text())
FULL = Draft202012Validator(SCHEMA)


def _without_required(node):
    if isinstance(node, dict):
        return {k: _without_required(v) for k, v in node.items() if k != "required"}
    if isinstance(node, list):
        return [_without_required(v) for v in node]
    return node


PARTIAL = Draft202012Validator(_without_required(SCHEMA))
FILES = sorted(paths.recipes_dir().glob("*/recipe.yaml")) + sorted((FIXTURES / "valid").glob("*/recipe.yaml"))


def _problems(validator, data) -> list[str]:
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(data)]


def test_the_schema_is_a_valid_2020_12_schema():
    Draft202012Validator.check_schema(SCHEMA)
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_file_as_written_and_merged_chain_validate(path: Path, monkeypatch):
    data = yaml.safe_load(path.read_text())
    validator = PARTIAL if "extends" in data else FULL
    assert _problems(validator, data) == []
    monkeypatch.setenv("COOKBOOK_RECIPES", str(path.parent.parent))
    merged = merge_chain(load_chain(path.parent.name))
    assert _problems(FULL, merged) == []


def test_the_schema_rejects_what_lint_rejects():
    data = yaml.safe_load(next(f for f in FILES if "extends" not in f.read_text()).read_text())
    assert _problems(PARTIAL, {**data, "serve_args": {}})  # unknown key
    assert _problems(PARTIAL, {**data, "schema_version": "one"})  # wrong type
    assert _problems(FULL, {k: v for k, v in data.items() if k != "name"})  # missing required key
