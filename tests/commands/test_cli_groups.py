"""`cookbook --help` lists what users run; the maintainers' commands sit under `cookbook maint`, and
their old spellings still run for one release, each with a note on stderr naming the new one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from cookbook import cli
from cookbook.cli import MOVED, main

ROOT = Path(__file__).resolve().parents[2]
USER = ["list", "show", "launch", "lint", "plan", "fetch", "serve", "image", "gates", "convert"]
MAINT = ["upgrade", "bisect", "fixes", "buckets", "data", "schema", "docs", "offline", "engine-check", "gates"]


def _commands(output: str) -> list[str]:
    listed = output.split("Commands:\n", 1)[1]
    return [m.group(1) for m in re.finditer(r"^  (\S+)", listed, re.M)]


def test_the_top_level_lists_what_users_run_and_the_maint_group():
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0
    assert _commands(res.output) == [*USER, "maint"]


def test_maint_lists_the_maintainers_commands():
    res = CliRunner().invoke(main, ["maint", "--help"])
    assert res.exit_code == 0 and sorted(_commands(res.output)) == sorted(MAINT)
    assert _commands(CliRunner().invoke(main, ["gates", "--help"]).output) == ["run", "verify"]
    assert _commands(CliRunner().invoke(main, ["maint", "gates", "--help"]).output) == ["calibrate", "compact"]


@pytest.mark.parametrize("old", sorted(MOVED), ids=" ".join)
def test_an_old_spelling_runs_the_new_command_and_names_it(old):
    new = MOVED[old]
    moved = CliRunner().invoke(main, [*old, "--help"])
    assert moved.exit_code == 0, moved.output
    note = f"note: `cookbook {' '.join(old)}` is now `cookbook {' '.join(new)}`"
    assert moved.stderr.startswith(note), moved.stderr
    now = CliRunner().invoke(main, [*new, "--help"])
    assert now.exit_code == 0 and now.stderr == ""
    # the same command: its help (past the usage line, which names the words typed) is the same
    assert moved.stdout.split("\n", 1)[1] == now.stdout.split("\n", 1)[1]


def test_an_old_spelling_runs_for_real(tmp_path):
    """`cookbook schema --check` still checks the schema (exit 0, nothing on stdout but its own)."""
    old = CliRunner().invoke(main, ["schema", "--check"])
    new = CliRunner().invoke(main, ["maint", "schema", "--check"])
    assert old.exit_code == new.exit_code == 0
    assert old.stdout == new.stdout and "is now `cookbook maint schema`" in old.stderr


def test_unknown_commands_are_refused_at_each_level():
    for args in (["bogus"], ["maint", "bogus"], ["gates", "bogus"], ["maint", "gates", "run"]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2 and "No such command" in res.output, args


def test_every_user_and_maintainer_command_loads():
    tables = [([], cli.USER), (["maint"], cli.MAINT_COMMANDS), (["gates"], cli.GATES_COMMANDS)]
    for prefix, table in [*tables, (["maint", "gates"], cli.MAINT_GATES_COMMANDS)]:
        for name in table:
            res = CliRunner().invoke(main, [*prefix, name, "--help"])
            assert res.exit_code == 0 and res.stderr == "", (prefix, name, res.output)


def test_the_readme_shows_cookbook_help_as_it_is():
    res = CliRunner().invoke(
        main, ["--help"], prog_name="cookbook", terminal_width=80
    )  # as an 80-column terminal shows it
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ cookbook --help\n", 1)[1].split("```", 1)[0]
    assert block == res.output
