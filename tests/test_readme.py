"""The README's layout table matches the tree: every top-level folder is named, every named path exists."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layout_paths() -> list[str]:
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## Layout") : text.index("\n## ", text.index("## Layout") + 1)]
    return re.findall(r"^\| `([^`]+)` \|", table, re.MULTILINE)


def test_every_path_in_the_layout_table_exists():
    paths = layout_paths()
    assert len(paths) >= 10
    for p in paths:
        concrete = p.split("<")[0].rstrip("/") or p
        assert (ROOT / concrete).exists(), f"README layout names {p}, which is not in the tree"


def test_every_tracked_top_level_folder_is_in_the_layout_table():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    folders = {line.split("/")[0] for line in tracked.splitlines() if "/" in line}
    named = {p.split("/")[0] for p in layout_paths()}
    missing = sorted(folders - named)
    assert not missing, f"top-level folders missing from the README's layout table: {missing}"


def test_no_readme_runs_over_250_lines():
    """READMEs are manuals: dated runs go to a run table beside the part (RUNS.md), not into them."""
    tracked = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "*README.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert len(tracked) >= 10
    long = {p: n for p in tracked if (ROOT / p).is_file() and (n := len((ROOT / p).read_text().splitlines())) > 250}
    assert not long, f"READMEs over 250 lines (move dated runs to a RUNS.md beside them): {long}"
