"""Every command that has --json prints one JSON error object on stdout when it fails (what, where,
the help line, the exit code), from the one helper (cookbook.errors.error_document, printed by
cookbook.cli), beside the `error:` lines on stderr."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from cookbook.cli import main

# (argv, the exit code, a part of `what`, `where` or a part of it)
CASES = [
    (["list", "--json", "--bogus"], 2, "--bogus", "cookbook list"),
    (["list", "--json", "--platform", "h1000"], 2, "h1000", "--platform"),
    (["show", "nope", "--json"], 2, "no recipe named 'nope'", "cookbook show"),
    (["show", "glm52-2", "--json", "--set", "serve.args.block_size=3"], 2, "--block-size 3", "rules.block-size-64"),
    (["launch", "glm52-2", "--json", "--node-rank", "1"], 2, "--node-rank needs --nodes", "cookbook launch"),
    (["launch", "nope", "--json"], 2, "no recipe named", "cookbook launch"),
    (["plan", "glm52-2", "--json", "--gpus", "0"], 2, "0 is not in the range", "--gpus"),
    (["plan", "glm52-2", "--json", "--platform", "h100"], 2, "does not fit", "cookbook plan"),
    (["fetch", "nope", "--dry-run", "--json"], 2, "no recipe named", "cookbook fetch"),
    (["image", "nope", "--dry-run", "--json"], 2, "no recipe named", "cookbook image"),
    (["convert", "gguf-inspect", "{tmp}/bad.gguf", "--json"], 2, "GGUF header", "bad.gguf"),
    (["lint", "{tmp}/none", "--json"], 2, "no such file or directory", "cookbook lint"),
]


def _run(argv, tmp_path):
    (tmp_path / "bad.gguf").write_bytes(b"xx\n")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    return CliRunner().invoke(main, argv, prog_name="cookbook")


@pytest.mark.parametrize("argv, code, what, where", CASES, ids=[" ".join(c[0][:2]) for c in CASES])
def test_a_failing_json_command_prints_one_error_object_on_stdout(argv, code, what, where, tmp_path):
    res = _run(argv, tmp_path)
    assert res.exit_code == code, res.output
    doc = json.loads(res.stdout)  # one document: nothing else on stdout
    err = doc["error"]
    assert err["exit_code"] == code
    assert what in err["what"] and where in err["where"]
    assert err["help"], err  # the help line (or the usage hint)
    assert err["command"].startswith("cookbook ")
    assert res.stderr.strip(), "the human message stays on stderr"


def test_without_json_stdout_stays_empty(tmp_path):
    res = _run(["show", "nope"], tmp_path)
    assert res.exit_code == 2 and res.stdout == "" and "no recipe named" in res.stderr


def test_a_refused_plan_with_json_carries_the_plan_in_its_error_object(tmp_path):
    err = json.loads(_run(["plan", "glm52-2", "--json", "--platform", "h100"], tmp_path).stdout)["error"]
    assert err["plan"]["fits"] is False


def test_every_command_with_json_is_covered():
    """A new --json command joins CASES (so its failure is seen to print the object)."""
    ctx = click.Context(main)
    with_json = set()

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])
        elif any("--json" in getattr(p, "opts", ()) for p in cmd.params):
            with_json.add(" ".join(path))

    walk(main, [])
    covered = {" ".join(argv[:2]) if argv[0] == "convert" else argv[0] for argv, *_ in CASES}
    assert with_json <= covered, f"no failing case for: {sorted(with_json - covered)}"
