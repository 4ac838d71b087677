"""recipe.verified: the verified block replaces recipe.yaml from `verified:` to the end, or is appended."""

import pytest
import yaml

from cookbook.recipe import verified


def test_with_block_replaces_to_eof_and_refuses_keys_after():
    text = "a: 1\n# keep me\nb: 2\nverified:\n  date: old\n  recipe_hash: x\n"
    out = verified.with_block(text, {"date": "new", "recipe_hash": "y"})
    assert out.startswith("a: 1\n# keep me\nb: 2\n") and "old" not in out
    assert yaml.safe_load(out)["verified"] == {"date": "new", "recipe_hash": "y"}
    assert verified.with_block("a: 1", {"date": "d"}).startswith("a: 1\n# written by")
    with pytest.raises(ValueError, match="last top-level key"):
        verified.with_block("verified:\n  date: x\nlater: 1\n", {"date": "d"})
