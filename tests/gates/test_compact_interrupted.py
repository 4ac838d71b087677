"""`cookbook gates compact` stopped at any point (issue 48, item 6): the bundle it leaves is brought
back by the next `compact`, which says what it removed, and then passes the manifest check that
`gates verify` uses; nothing a run wrote is lost. Each stop is made where compact's steps meet
(every .gz written, the manifest replaced, the .jsonl removed), as a kill there would leave it."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cookbook.evidence.manifest import check_manifest
from cookbook.gates import bundle as bundle_mod
from cookbook.gates.bundle import compact, write_manifest

NAMES = ("greedy", "needles", "speed")


@pytest.fixture
def plain(tmp_path):
    root = tmp_path / "bundle"
    (root / "transcripts").mkdir(parents=True)
    (root / "results.json").write_text(json.dumps({"complete": True}))
    for i, n in enumerate(NAMES):
        (root / "transcripts" / f"{n}.jsonl").write_text(
            "".join(f'{{"i": {j}, "gate": "{n}"}}\n' for j in range(50 + i))
        )
    write_manifest(root)
    return root


def _originals(root: Path) -> dict[str, bytes]:
    return {n: (root / "transcripts" / f"{n}.jsonl").read_bytes() for n in NAMES}


def _cli_compact(root: Path):
    return subprocess.run(
        [sys.executable, "-m", "cookbook.cli", "maint", "gates", "compact", str(root)], capture_output=True, text=True
    )


def _finished(root: Path, originals: dict[str, bytes]):
    assert check_manifest(root) == []
    assert not list((root / "transcripts").glob("*.jsonl"))
    for n, data in originals.items():
        assert gzip.decompress((root / "transcripts" / f"{n}.jsonl.gz").read_bytes()) == data


class Stop(BaseException):
    """What a kill does to the rest of compact: nothing after it runs."""


def test_stopped_after_some_gz_files(plain, monkeypatch):
    originals = _originals(plain)
    real = bundle_mod._gunzip_sha256
    calls = []

    def stop_on_second(path):
        calls.append(path)
        if len(calls) == 2:
            raise Stop
        return real(path)

    monkeypatch.setattr(bundle_mod, "_gunzip_sha256", stop_on_second)
    with pytest.raises(Stop):
        compact(plain)
    monkeypatch.undo()
    assert check_manifest(plain) != []  # two .gz the manifest does not list yet
    r = _cli_compact(plain)
    assert r.returncode == 0, r.stderr
    assert "left by an interrupted compact" in r.stdout
    _finished(plain, originals)


def test_stopped_before_the_manifest_is_replaced(plain, monkeypatch):
    originals = _originals(plain)
    monkeypatch.setattr(bundle_mod, "atomic_write", lambda *a, **k: (_ for _ in ()).throw(Stop()))
    with pytest.raises(Stop):
        compact(plain)
    monkeypatch.undo()
    assert all((plain / "transcripts" / f"{n}.jsonl").exists() for n in NAMES)  # nothing removed yet
    r = _cli_compact(plain)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("left by an interrupted compact") == len(NAMES)
    _finished(plain, originals)


def test_stopped_while_removing_the_jsonl(plain, monkeypatch):
    originals = _originals(plain)
    real_unlink = Path.unlink
    removed = []

    def unlink_once(self, missing_ok=False):
        if self.suffix == ".jsonl":
            if removed:
                raise Stop
            removed.append(self)
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink_once)
    with pytest.raises(Stop):
        compact(plain)
    monkeypatch.undo()
    r = _cli_compact(plain)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("left by an interrupted compact") == len(NAMES) - 1
    _finished(plain, originals)


def test_a_cut_short_gz_is_written_again(plain):
    originals = _originals(plain)
    whole = gzip.compress(originals["speed"])
    (plain / "transcripts" / "speed.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    r = _cli_compact(plain)
    assert r.returncode == 0, r.stderr
    _finished(plain, originals)


def test_a_foreign_gz_is_not_taken_for_a_leftover(plain):
    """A .gz that is not the .jsonl's content is not compact's: it is refused, not removed."""
    (plain / "transcripts" / "speed.jsonl.gz").write_bytes(gzip.compress(b"someone else's bytes\n"))
    r = _cli_compact(plain)
    assert r.returncode == 2 and "does not list" in r.stderr
    assert (plain / "transcripts" / "speed.jsonl.gz").exists() and (plain / "transcripts" / "speed.jsonl").exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_real_kill_mid_compact_is_recovered(plain, tmp_path):
    """SIGKILL while the manifest is being replaced: the child stops itself there."""
    originals = _originals(plain)
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from cookbook.gates import bundle\n"
        "bundle.atomic_write = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
        "bundle.compact(Path(sys.argv[1]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(plain)], capture_output=True)
    assert done.returncode == -9
    r = _cli_compact(plain)
    assert r.returncode == 0, r.stderr
    _finished(plain, originals)


def test_a_compact_killed_mid_gzip_resumes(plain):
    """Issue 64, item 3: a compact killed inside the gzip of a large transcript leaves the atomic
    writer's hidden temporary (.greedy.jsonl.gz.PID.XXXXXXXX.tmp). The next compact removes it (its
    writer is gone) and finishes; verify's manifest check says what it is meanwhile."""
    originals = _originals(plain)
    dead = 4_000_000  # above any PID this machine hands out (pid_max is at most 4,194,304; none lives there)
    leftover = plain / "transcripts" / f".greedy.jsonl.gz.{dead}.k1ll3d00.tmp"
    leftover.write_bytes(gzip.compress(b'{"i": 0')[:20])  # cut short, as a kill leaves it
    problems = check_manifest(plain)
    assert any("writer's temporary" in p and "gates compact" in p for p in problems), problems
    run = _cli_compact(plain)
    assert run.returncode == 0, run.stderr
    assert not leftover.exists()
    _finished(plain, originals)
