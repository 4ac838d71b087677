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
    bundle = root / SLUG / "evidence" / RUN
    rebind_to_file_hash(bundle)
    return bundle


def rebind_to_file_hash(bundle: Path) -> None:
    """A bundle run before the recipe hash covered the files a recipe serves with (issue 64, item 4)
    records recipe.resolved.json without `used_files`, so it no longer matches the recipe: the recipe
    itself shows stale until its gates run again. For tests only, this adds the digests of the files
    as the checkout holds them (the chat template has not changed since the run: git log), and
    re-binds results.json, the verified block and the manifest to that hash; a no-op for a bundle
    that already records them."""
    from cookbook.gates.bundle import write_manifest
    from cookbook.recipe.resolve import content_hash, resolve

    resolved_file = bundle / "recipe.resolved.json"
    data = json.loads(resolved_file.read_text())
    if "used_files" in data:
        return
    resolved = resolve(SLUG, check=False)
    data["used_files"] = resolved.files
    resolved_file.write_text(json.dumps(data, indent=2) + "\n")
    doc = json.loads((bundle / "results.json").read_text())
    old, new = doc["recipe_hash"], content_hash({**data, "selected_quant": doc.get("quant")})
    edit_results(bundle, lambda d: d.update(recipe_hash=new))
    recipe = resolved.path
    recipe.write_text(recipe.read_text().replace(old, new))
    write_manifest(bundle)


def genuine_bundle(tmp_path: Path, monkeypatch) -> Path:
    """The real bundle as `gates run` sealed it (manifest included), on a copy of its recipe."""
    return copy_cpu_recipe(tmp_path, monkeypatch)
