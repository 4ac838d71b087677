"""The real CPU bundle committed with recipes/gemma3-270m-cpu, copied and edited for tests."""

import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SLUG = "gemma3-270m-cpu"
RUN = "20261205T074539Z"


def edit_results(bundle: Path, fn) -> None:
    doc = json.loads((bundle / "results.json").read_text())
    fn(doc)
    (bundle / "results.json").write_text(json.dumps(doc, indent=2))


def edit_transcript(bundle: Path, gate: str, fn) -> None:
    f = bundle / "transcripts" / f"{gate}.jsonl"
    recs = [json.loads(line) for line in f.read_text().splitlines()]
    for r in recs:
        fn(r)
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))


def copy_cpu_recipe(tmp_path: Path, monkeypatch) -> Path:
    """tmp recipes/ with a copy of the CPU recipe and its committed bundle (real, sealed by `gates run`); returns the bundle."""
    root = tmp_path / "recipes"
    shutil.copytree(REPO / "recipes" / SLUG, root / SLUG)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(root))
    monkeypatch.setenv("COOKBOOK_ROOT", str(tmp_path))  # the block's bundle path and .cache/ resolve here
    return root / SLUG / "evidence" / RUN


def genuine_bundle(tmp_path: Path, monkeypatch) -> Path:
    """The real bundle as `gates run` sealed it (manifest included), on a copy of its recipe."""
    return copy_cpu_recipe(tmp_path, monkeypatch)
