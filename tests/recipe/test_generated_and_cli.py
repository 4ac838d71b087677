import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cookbook(*args, **kw):
    return subprocess.run([sys.executable, "-m", "cookbook.cli", *args], capture_output=True, text=True, cwd=ROOT, **kw)


def test_committed_schema_matches_the_model():
    from cookbook.recipe.model import json_schema

    committed = json.loads((ROOT / "schema" / "recipe.schema.json").read_text())
    assert committed == json_schema(), "schema/recipe.schema.json is stale: run `cookbook schema`"
    p = cookbook("schema", "--check")
    assert p.returncode == 0, p.stderr


def test_schema_check_fails_when_stale(tmp_path):
    import os
    import shutil

    root = tmp_path / "repo"
    (root / "schema").mkdir(parents=True)
    (root / "recipes").mkdir()
    shutil.copy(ROOT / "pyproject.toml", root)
    (root / "schema" / "recipe.schema.json").write_text("{}\n")
    p = cookbook("schema", "--check", env=dict(os.environ, COOKBOOK_ROOT=str(root)))
    assert p.returncode == 1
    assert "is stale; run `cookbook schema`" in p.stderr
    assert (root / "schema" / "recipe.schema.json").read_text() == "{}\n", "check mode must not write"


def test_docs_are_up_to_date():
    p = cookbook("docs", "--check")
    assert p.returncode == 0, p.stdout + p.stderr


def test_recipe_commands_import_no_heavy_modules():
    code = (
        "import sys, runpy; sys.argv=['cookbook','list','--json'];\n"
        "try:\n    runpy.run_module('cookbook.cli', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "heavy=[m for m in ('torch','vllm','numpy','transformers') if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "HEAVY []" in p.stdout, p.stdout[-500:] + p.stderr[-2000:]


def test_help_lists_every_command_without_importing_them():
    code = (
        "import sys; from click.testing import CliRunner; from cookbook.cli import main;\n"
        "r = CliRunner().invoke(main, ['--help']); print(r.output);\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith('cookbook.')))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    for name in ("list", "show", "launch", "lint", "plan", "fetch", "serve", "image", "gates", "convert", "maint"):
        assert f"  {name} " in p.stdout
    loaded = p.stdout.split("LOADED")[1]
    assert "cookbook.recipe" not in loaded and "cookbook.commands" not in loaded


def test_platform_detection_reasons(monkeypatch):
    from cookbook import platforms

    cpu = platforms.LocalMachine("cpu", 0, None, 24, "test")
    ok, why = platforms.can_run("mi300x", 2, None, cpu)
    assert not ok and "needs 2x AMD Instinct MI300X; this machine has no accelerator" == why
    two = platforms.LocalMachine("mi300x", 2, 192, 512, "test")
    assert platforms.can_run("mi300x", 2, None, two)[0]
    ok, why = platforms.can_run("mi300x", 8, None, two)
    assert not ok and "only 2" in why
    small = platforms.LocalMachine("a100-40gb", 8, 40, 512, "test")
    ok, why = platforms.can_run("a100-80gb", 4, None, small)
    assert not ok and "a100-40gb" in why
    ok, why = platforms.can_run("cpu", 0, 64, cpu)
    assert not ok and "needs 64 GiB RAM" in why
    assert platforms.can_run("cpu", 0, 8, cpu)[0]
