"""pyproject.toml declares what src/cookbook imports, and only that (scripts/check-deps)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_declared_dependencies_match_the_imports():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "check-deps")], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "matplotlib" in p.stdout and "[dev, plots] cookbook.gates.speed (lazy)" in p.stdout


def test_speed_plot_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch):
    from cookbook.gates import speed

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    why = speed.plot([{"concurrency": 1, "output_throughput": 1.0}], tmp_path / "p.png")
    assert why and "matplotlib is not installed" in why and "'.[plots]'" in why
    assert list(tmp_path.iterdir()) == []


def test_speed_plot_writes_a_png(tmp_path):
    from cookbook.gates import speed

    rows = [{"concurrency": c, "output_throughput": float(c)} for c in (1, 2, 4)]
    assert speed.plot(rows, tmp_path / "p.png") is None
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in tmp_path.iterdir()] == ["p.png"]
