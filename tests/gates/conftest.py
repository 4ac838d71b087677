"""Gate-suite fixtures: a copy of the test recipe in a temporary recipes folder, small gate data."""

import json
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


def write_small_gsm8k(folder: Path, n_test: int = 48, n_train: int = 8) -> Path:
    """GSM8K-shaped jsonl files (question, answer ending '#### N') of simple problems made here."""
    names = ["Ada", "Ben", "Cleo", "Dev", "Esme", "Finn", "Gus", "Hana"]
    things = ["apples", "pencils", "marbles", "stamps", "shells", "books"]
    folder.mkdir(parents=True, exist_ok=True)
    for split, n, off in (("test", n_test, 0), ("train", n_train, 100)):
        rows = []
        for i in range(n):
            a, b, who, what = 3 + (i + off) % 17, 2 + (i * 7 + off) % 11, names[i % 8], things[i % 6]
            rows.append(
                {
                    "question": f"{who} has {a} {what} and is given {b} more. How many {what} does {who} have now?",
                    "answer": f"{who} has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} {what}.\n#### {a + b}",
                }
            )
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


@pytest.fixture
def data_dir(tmp_path):
    """A gate-data folder made here: gsm8k/ with small GSM8K-shaped files (no haystack/: the test
    recipe's needles use the built-in prose). Nothing outside the clone is read."""
    root = tmp_path / "data"
    write_small_gsm8k(root / "gsm8k")
    return root
