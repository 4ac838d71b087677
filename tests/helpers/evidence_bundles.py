"""The real CPU bundle committed with recipes/gemma3-270m-cpu, copied and edited for tests."""

import json
import shutil
from pathlib import Path

from cookbook.gates.bundle import write_manifest

REPO = Path(__file__).resolve().parents[2]
SLUG = "gemma3-270m-cpu"
RUN = "20261201T102732Z"


def upgrade(bundle: Path) -> None:
    """The committed bundle predates two parts of the current format, both filled from the same run:
    the speed gate's own TTFT /metrics snapshots (the run's spec_acceptance-after and final snapshots,
    real server output bracketing the TTFT requests: their prefix-cache delta is 0, as recorded) and
    the decode token counts (64 each, as the transcripts show)."""
    shutil.copy(bundle / "spec_acceptance.metrics-after.prom", bundle / "speed.metrics-before.prom")
    shutil.copy(bundle / "metrics-after.prom", bundle / "speed.metrics-after.prom")
    edit_results(
        bundle,
        lambda d: d["gates"]["speed"]["measured"].update(decode_tokens={"1_stream": 64, "4_streams": [64, 64, 64, 64]}),
    )


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
    """tmp recipes/ with a copy of the CPU recipe and its committed (manifest-less) bundle; returns the bundle."""
    root = tmp_path / "recipes"
    shutil.copytree(REPO / "recipes" / SLUG, root / SLUG)
    monkeypatch.setenv("COOKBOOK_RECIPES", str(root))
    monkeypatch.setenv("COOKBOOK_ROOT", str(tmp_path))  # the block's bundle path and .cache/ resolve here
    return root / SLUG / "evidence" / RUN


def genuine_bundle(tmp_path: Path, monkeypatch) -> Path:
    """The real bundle in the current format, sealed with its manifest."""
    b = copy_cpu_recipe(tmp_path, monkeypatch)
    upgrade(b)
    write_manifest(b)
    return b
