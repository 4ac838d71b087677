"""A writer killed with SIGKILL leaves its hidden `.NAME.PID.*.tmp` behind; the next run of the same
write removes it and says so (issue 48, item 9). A live writer's temporary, another name's, or a
file of the user's own that merely looks alike is never touched."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from cookbook.files import atomic_dir, atomic_set, atomic_write, clean_leftovers

KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from cookbook.files import atomic_dir, atomic_file, atomic_set
    target, how = Path(sys.argv[1]), sys.argv[2]
    if how == "file":
        ctx = atomic_file(target, overwrite=True)
    elif how == "dir":
        ctx = atomic_dir(target, force=True)
    else:
        ctx = atomic_set([target], overwrite=True)
    with ctx as tmp:
        if how == "set":
            tmp.temp(target).write_text("half")
        elif how == "file":
            tmp.write_text("half")
        else:
            (tmp / "half").write_text("half")
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _killed(target, how):
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(target), how], capture_output=True)
    assert done.returncode == -9
    left = [p for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]
    assert len(left) == 1, left  # what kill -9 leaves
    return left[0]


def test_a_killed_file_writer_is_cleaned_up_by_the_next_write(tmp_path, capsys):
    target = tmp_path / "out.json"
    left = _killed(target, "file")
    atomic_write(target, "{}")
    assert not left.exists() and target.read_text() == "{}"
    assert f"removed {left}, left by an interrupted run" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_killed_folder_writer_is_cleaned_up_by_the_next_write(tmp_path, capsys):
    target = tmp_path / "context"
    left = _killed(target, "dir")
    with atomic_dir(target, force=True) as tmp:
        (tmp / "f").write_text("x")
    assert not left.exists() and (target / "f").exists()
    assert "left by an interrupted run" in capsys.readouterr().err


def test_a_killed_set_writer_is_cleaned_up_by_the_next_set(tmp_path):
    target = tmp_path / "shard-1"
    left = _killed(target, "set")
    with atomic_set([target], overwrite=True) as s:
        s.temp(target).write_text("whole")
    assert not left.exists() and target.read_text() == "whole"


def test_live_writers_other_names_and_lookalikes_are_kept(tmp_path):
    target = tmp_path / "out.json"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        keep = [
            tmp_path / f".out.json.{live.pid}.abcdefgh.tmp",  # a writer still running
            tmp_path / ".other.json.999999999.abcdefgh.tmp",  # another target's
            tmp_path / ".out.json.tmp",  # not a temporary of this helper's form
            tmp_path / ".out.json.notapid.abcdefgh.tmp",
            tmp_path / "out.json.999999999.abcdefgh.tmp",  # not hidden: the user's own
        ]
        for k in keep:
            k.write_text("keep")
        assert clean_leftovers(target) == []
        assert all(k.exists() for k in keep)
    finally:
        live.kill()
        live.wait()
