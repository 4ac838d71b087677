"""Receive an offline payload on a host that reaches no registry, one piece per transfer.

Runs there with the host's bare python3: standard library only, and nothing else from the
cookbook is imported, so it works before the engine or the cookbook's dependencies exist.

    python3 scripts/offline-gpu/receive.py PIECES_DIR [--into DIR]
    python3 scripts/offline-gpu/receive.py --installed [--into DIR]   # print env.sh once it is verified
    python3 scripts/offline-gpu/receive.py --where [--into DIR]       # print the folder it uses

PIECES_DIR holds `pieces.json` (written by `cookbook maint offline pack`) and any subset of the
pieces it lists. Each call appends the pieces present, in order, to DIR/payload.tar, each
checked against its size and sha256 before it is appended; a piece already received is
skipped, and a piece that arrives before its predecessor waits in DIR until the gap is filled.
When the last piece is in, the whole payload is checked and unpacked:

    DIR/engine/   the engine's wheel, unpacked (PYTHONPATH entry)
    DIR/site/     every carried wheel, installed with pip --target --no-deps (PYTHONPATH entry)

and DIR/env.sh exports PYTHONPATH for both, and for the folders the carried .pth files add.
The exit is 0 with a line saying how many pieces are still missing, 1 when a piece or the
whole payload fails its checksum, 2 when pieces.json, a piece or DIR is refused.

What it trusts, and why (pieces.json and the pieces come from another machine; DIR may be
in a shared folder):
- a piece name is a plain `piece-NN` name, listed once, at the offset the pieces before it end
  at; the sizes add up to the payload's. Anything else is refused before a byte is read.
- a piece is opened without following a link, and only a regular file is read (a FIFO or a
  device is refused, never waited on); its size and sha256 are checked before it is used.
- DIR (default: $COOKBOOK_OFFLINE, else $XDG_CACHE_HOME/cookbook-offline, else
  ~/.cache/cookbook-offline) is created 0700; an existing one must be a real folder of this user
  that no one else can write. Every file in it is opened without following links.
- nothing found in DIR is believed: the pieces already in payload.tar are re-hashed on every
  call (a tail that does not match is cut off), a staged piece is re-hashed before it is
  appended, and env.sh is reported installed only while its sha256 matches the one this script
  recorded in installed.json when it wrote it.
- console-script names from the engine's entry points are plain file names (written only
  into DIR/bin), and their targets dotted Python names.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

CHUNK = 1 << 20
MANIFEST_MAX = 4 << 20  # bytes of pieces.json read at most
PIECES_MAX = 100_000
PIECE_NAME = re.compile(r"piece-[0-9]{2,6}")
HEX64 = re.compile(r"[0-9a-f]{64}")
SCRIPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
ENGINE_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,250}\.tar\.xz")
STATE, INSTALLED, PAYLOAD = "received.json", "installed.json", "payload.tar"


class Refused(Exception):
    """One message (what, where), a help line, an exit code."""

    def __init__(self, msg: str, help: str = "", code: int = 2):
        super().__init__(msg)
        self.help, self.code = help, code


def fail(msg: str, help: str = "", code: int = 1) -> int:
    print(f"error: {msg}", file=sys.stderr)
    if help:
        print(f"  help: {help}", file=sys.stderr)
    return code


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device")):
        if test(mode):
            return name
    return "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def open_regular(path, flags: int = os.O_RDONLY, *, dir_fd: int | None = None, mode: int = 0o600) -> int:
    """An fd on a regular file, opened without following a link and without blocking (a FIFO
    opens at once and is then refused); Refused for anything else."""
    shown = path
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Refused(f"{shown}: is a symbolic link; refused (only regular files are read)") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise Refused(f"{shown}: is {_kind(st.st_mode)}, not a regular file; refused")
    os.set_blocking(fd, True)
    return fd


def _read_bounded(fd: int, limit: int, what) -> bytes:
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise Refused(f"{what}: larger than {limit} bytes; refused")
    return data


def _json(data: bytes, what) -> object:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise Refused(
            f"{what}: not valid JSON ({type(e).__name__})",
            help="carry the pieces.json `cookbook maint offline pack` wrote",
        ) from None


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def load_manifest(pieces_dir: Path) -> dict:
    """pieces.json, checked whole: a payload that could never complete is refused here."""
    where = pieces_dir / "pieces.json"
    try:
        raw = _json(_read_bounded(open_regular(where), MANIFEST_MAX, where), where)
    except FileNotFoundError:
        raise Refused(
            f"{pieces_dir}: no pieces.json", help="carry the folder `cookbook maint offline pack` wrote"
        ) from None
    except NotADirectoryError:
        raise Refused(
            f"{pieces_dir}: is not a folder; give the folder that holds pieces.json and its pieces",
            help="e.g. receive.py .carry/gemma3-270m-h200 (the folder `cookbook maint offline pack` wrote)",
        ) from None
    fix = "make the pieces again with `cookbook maint offline pack` and carry its pieces.json unchanged"

    def bad(what: str):
        return Refused(f"{where}: {what}", help=fix)

    if not isinstance(raw, dict):
        raise bad("not a JSON object")
    if not isinstance(raw.get("sha256"), str) or not HEX64.fullmatch(raw["sha256"]):
        raise bad("`sha256` is not 64 lowercase hex digits")
    if not _int(raw.get("size")) or raw["size"] < 1:
        raise bad("`size` is not a positive whole number")
    pieces = raw.get("pieces")
    if not isinstance(pieces, list) or not 1 <= len(pieces) <= PIECES_MAX:
        raise bad(f"`pieces` is not a list of 1 to {PIECES_MAX} entries")
    seen, offset = set(), 0
    for i, p in enumerate(pieces):
        at = f"pieces[{i}]"
        if not isinstance(p, dict):
            raise bad(f"{at} is not an object")
        name = p.get("name")
        if not isinstance(name, str) or not PIECE_NAME.fullmatch(name):
            raise bad(f"{at}.name {ascii(name)[:80]} is not a plain piece name (piece-NN)")
        if name in seen:
            raise bad(f"{at}.name {name} is listed twice")
        seen.add(name)
        if not isinstance(p.get("sha256"), str) or not HEX64.fullmatch(p["sha256"]):
            raise bad(f"{at}.sha256 is not 64 lowercase hex digits")
        if not _int(p.get("size")) or p["size"] < 1:
            raise bad(f"{at}.size is not a positive whole number")
        if p.get("offset") != offset or not _int(p.get("offset")):
            raise bad(f"{at}.offset is {ascii(p.get('offset'))[:40]}; the pieces before it end at {offset}")
        offset += p["size"]
    if offset != raw["size"]:
        raise bad(f"the pieces add up to {offset} bytes, `size` says {raw['size']}")
    return raw


def default_into() -> Path:
    """$COOKBOOK_OFFLINE, else the user's cache folder: never a fixed name in a shared folder."""
    if os.environ.get("COOKBOOK_OFFLINE"):
        return Path(os.environ["COOKBOOK_OFFLINE"])
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "cookbook-offline"
    try:
        return Path.home() / ".cache" / "cookbook-offline"
    except RuntimeError:
        raise Refused("no home folder to keep the payload in", help="pass --into DIR (a folder of your own)") from None


def private_dir(into: Path) -> int:
    """An fd on `into`, created 0700 if absent; refused unless it is a real folder of this user that
    group and others cannot write."""
    if not os.path.lexists(into):
        os.makedirs(into.parent, mode=0o700, exist_ok=True)
        try:
            os.mkdir(into, 0o700)
        except FileExistsError:
            pass  # made meanwhile: checked below like any existing one
    try:
        fd = os.open(into, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(
                f"{into}: is not a folder (a link or a file); refused", help="pass --into a folder of your own"
            ) from None
        raise
    st = os.fstat(fd)
    help = f"remove {into}, or pass --into a folder only you can write (made with mode 0700)"
    if st.st_uid != os.getuid():
        os.close(fd)
        raise Refused(f"{into}: belongs to uid {st.st_uid}, not you (uid {os.getuid()}); refused", help=help)
    if st.st_mode & 0o022:
        os.close(fd)
        raise Refused(f"{into}: group or others can write it (mode {stat.S_IMODE(st.st_mode):o}); refused", help=help)
    return fd


def _write_new(dfd: int, name: str, data: bytes, mode: int = 0o600) -> None:
    """Write `name` in the folder atomically: a fresh temporary file (O_EXCL, no link followed), renamed."""
    tmp = f".{name}.new"
    _unlink(dfd, tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)


def _present(name: str, dfd: int) -> bool:
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def _unlink(dfd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dfd)
    except FileNotFoundError:
        pass


def _read_state(dfd: int, name: str, into: Path) -> dict | None:
    try:
        fd = open_regular(name, dir_fd=dfd)
    except FileNotFoundError:
        return None
    data = _json(_read_bounded(fd, 1 << 16, into / name), into / name)
    if not isinstance(data, dict) or not isinstance(data.get("payload"), str):
        raise Refused(
            f"{into / name}: not a state file this receiver wrote", help=f"remove {into} and send the pieces again"
        )
    return data


def _copy_hashed(src: int, dst: int | None, limit: int, dst_offset: int = 0) -> tuple[str, int]:
    """sha256 and length of at most `limit` bytes of src from its position (callers ask one byte more
    than they expect, so a file that grew meanwhile shows as too long), written to dst at dst_offset
    when dst is given."""
    h, n = hashlib.sha256(), 0
    while n < limit:
        block = os.read(src, min(CHUNK, limit - n))
        if not block:
            break
        h.update(block)
        if dst is not None:
            os.pwrite(dst, block, dst_offset + n)
        n += len(block)
    return h.hexdigest(), n


def installed_env(into: Path, dfd: int, payload_sha: str | None = None) -> Path | None:
    """DIR/env.sh if installed.json (written by this script) records it and its sha256 still matches."""
    record = _read_state(dfd, INSTALLED, into)
    if record is None:
        return None
    if payload_sha is not None and record["payload"] != payload_sha:
        raise Refused(
            f"{into} holds another, installed payload ({record['payload'][:12]}, not {payload_sha[:12]})",
            help=f"remove {into} or pass --into another folder",
            code=1,
        )
    try:
        fd = open_regular("env.sh", dir_fd=dfd)
    except FileNotFoundError:
        raise Refused(
            f"{into / 'env.sh'} is missing, though {INSTALLED} records it",
            help=f"remove {into} and send the pieces again",
            code=1,
        ) from None
    got, _ = _copy_hashed(fd, None, 1 << 20)
    os.close(fd)
    if got != record.get("env_sh"):
        raise Refused(
            f"{into / 'env.sh'} is not the file this receiver wrote (its sha256 changed); not sourcing it",
            help=f"remove {into} and send the pieces again",
            code=1,
        )
    return into / "env.sh"


def receive(pieces_dir: Path, into: Path) -> int:
    manifest = load_manifest(pieces_dir)
    pieces, want = manifest["pieces"], manifest["sha256"]
    dfd = private_dir(into)
    try:
        env = installed_env(into, dfd, want)
        if env is not None:
            print(f"payload complete and installed; source {env}", flush=True)
            return 0
        state = _read_state(dfd, STATE, into)
        if state is not None and state["payload"] != want:
            return fail(
                f"{into} holds pieces of another payload ({state['payload'][:12]}, not {want[:12]})",
                help=f"remove {into} and send the pieces again",
            )
        if state is None:
            _write_new(dfd, STATE, json.dumps({"payload": want}).encode())
        try:
            out = open_regular(PAYLOAD, os.O_RDWR, dir_fd=dfd)
        except FileNotFoundError:
            out = None  # made at the first append, so a refused first piece leaves none
        try:
            done = _verified_prefix(out, pieces, into) if out is not None else 0
            _stage(pieces_dir, pieces[done:], dfd, into)
            while done < len(pieces):
                if out is None and _present(pieces[done]["name"], dfd):
                    out = open_regular(PAYLOAD, os.O_RDWR | os.O_CREAT, dir_fd=dfd)
                if out is None or not _append(pieces[done], out, dfd, into):
                    break
                done += 1
            if done < len(pieces):
                # pieces that came before the one the payload needs next wait, checked, in DIR
                held = [p["name"] for p in pieces[done:] if _present(p["name"], dfd)]
                wait = f"; holding {', '.join(held)} until {pieces[done]['name']} arrives" if held else ""
                print(f"{len(pieces) - done - len(held)} of {len(pieces)} pieces still to come{wait}", flush=True)
                return 0
            os.lseek(out, 0, os.SEEK_SET)
            got, _ = _copy_hashed(out, None, manifest["size"] + 1)
        finally:
            if out is not None:
                os.close(out)
        if got != want:
            return fail(
                f"{into / PAYLOAD}: the joined payload fails its sha256",
                help=f"remove {into} and send the pieces again",
            )
        return install(into / PAYLOAD, into, dfd, want)
    finally:
        os.close(dfd)


def _verified_prefix(out: int, pieces: list[dict], into: Path) -> int:
    """How many pieces payload.tar holds, each re-hashed; whatever follows them is cut off."""
    size, done = os.fstat(out).st_size, 0
    for p in pieces:
        if size < p["offset"] + p["size"]:
            break
        os.lseek(out, p["offset"], os.SEEK_SET)
        if _copy_hashed(out, None, p["size"])[0] != p["sha256"]:
            break
        done += 1
    keep = pieces[done]["offset"] if done < len(pieces) else size
    if size > keep:
        print(f"{into / PAYLOAD}: {size - keep} bytes after piece {done} do not match; cut off", flush=True)
        os.ftruncate(out, keep)
    return done


def _stage(pieces_dir: Path, todo: list[dict], dfd: int, into: Path) -> None:
    """Copy the pieces present into DIR (they may arrive out of order), each checked first."""
    for p in todo:
        src = pieces_dir / p["name"]
        try:
            fd = open_regular(src)
        except FileNotFoundError:
            continue
        try:
            if os.fstat(fd).st_size != p["size"]:
                raise Refused(
                    f"{src}: {os.fstat(fd).st_size} bytes, pieces.json says {p['size']}",
                    help="carry the piece again (it was cut short or changed)",
                    code=1,
                )
            tmp = f".{p['name']}.part"
            _unlink(dfd, tmp)
            dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
            try:
                got, n = _copy_hashed(fd, dst, p["size"] + 1)
            finally:
                os.close(dst)
            if got != p["sha256"] or n != p["size"]:
                _unlink(dfd, tmp)
                raise Refused(
                    f"{src}: sha256 mismatch", help="make the pieces again with `cookbook maint offline pack`", code=1
                )
            os.replace(tmp, p["name"], src_dir_fd=dfd, dst_dir_fd=dfd)
        finally:
            os.close(fd)


def _append(p: dict, out: int, dfd: int, into: Path) -> bool:
    """Append the staged piece `p` at its offset, re-hashed as it is copied; False if it is not here."""
    try:
        fd = open_regular(p["name"], dir_fd=dfd)
    except FileNotFoundError:
        return False
    try:
        os.ftruncate(out, p["offset"])  # an append cut short by a kill is redone, not doubled
        got, n = _copy_hashed(fd, out, p["size"] + 1, p["offset"])
    finally:
        os.close(fd)
    if got != p["sha256"] or n != p["size"]:
        os.ftruncate(out, p["offset"])
        _unlink(dfd, p["name"])
        print(f"{into / p['name']}: changed since it was checked; removed, send it again", flush=True)
        return False
    _unlink(dfd, p["name"])
    print(f"received {p['name']} ({p['size'] / 2**20:.1f} MiB)", flush=True)
    return True


def install(payload: Path, into: Path, dfd: int, payload_sha: str) -> int:
    unpacked = into / "payload"
    shutil.rmtree(unpacked, ignore_errors=True)  # a run killed mid-install left it
    with tarfile.open(payload) as tar:
        tar.extractall(unpacked, filter="data")
    contents = _json((unpacked / "contents.json").read_bytes(), unpacked / "contents.json")
    engine_file = contents.get("engine") if isinstance(contents, dict) else None
    if not isinstance(engine_file, str) or not ENGINE_FILE.fullmatch(engine_file):
        return fail(f"{unpacked / 'contents.json'}: `engine` is not a plain .tar.xz name", code=2)
    engine = into / "engine"
    shutil.rmtree(engine, ignore_errors=True)
    engine.mkdir(mode=0o700)
    with tarfile.open(unpacked / engine_file) as tar:
        tar.extractall(engine, filter="data")
    wheels = sorted(str(p) for p in (unpacked / "wheels").glob("*.whl") if p.is_file() and not p.is_symlink())
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    pip += ["--no-cache-dir", "--upgrade", "--target", str(into / "site"), *wheels]
    if subprocess.run(pip).returncode != 0:
        return fail(f"pip could not install the {len(wheels)} carried wheels into {into / 'site'}")
    shutil.rmtree(unpacked)
    payload.unlink()
    scripts = console_scripts(engine, into / "bin")
    path = ":".join([str(into / "site"), *pth_paths(into / "site"), str(engine)])
    bins = f"{into / 'bin'}:{into / 'site' / 'bin'}"
    env = (
        f'export PYTHONPATH={shlex.quote(path)}"${{PYTHONPATH:+:$PYTHONPATH}}"\n'
        f'export PATH={shlex.quote(bins)}":$PATH"\n'
    ).encode()
    _write_new(dfd, "env.sh", env)
    _write_new(dfd, INSTALLED, json.dumps({"payload": payload_sha, "env_sh": hashlib.sha256(env).hexdigest()}).encode())
    _unlink(dfd, STATE)
    print(f"console scripts: {', '.join(scripts) or 'none'}", flush=True)
    name = str(contents.get("engine_name", "the engine")).encode("ascii", "backslashreplace").decode()[:200]
    print(f"installed {name} and {len(wheels)} wheels; source {into / 'env.sh'}", flush=True)
    return 0


def pth_paths(site_dir: Path) -> list[str]:
    """The folders the site's .pth files add to sys.path. pip --target leaves .pth files where only a
    site directory reads them, and PYTHONPATH is not one (nvidia-cutlass-dsl's .pth is what makes
    `import cutlass` work); so site.addsitedir runs them once, here, and env.sh lists what they added."""
    probe = (
        "import json, site, sys; before = set(sys.path); site.addsitedir(sys.argv[1]); "
        "print(json.dumps([p for p in sys.path if p not in before and p != sys.argv[1]]))"
    )
    run = subprocess.run([sys.executable, "-c", probe, str(site_dir)], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"warning: the .pth files in {site_dir} did not run: {run.stderr.strip()}", file=sys.stderr)
        return []
    found = json.loads(run.stdout.strip().splitlines()[-1])
    return [p for p in found if isinstance(p, str) and ":" not in p and "\n" not in p]


def console_scripts(engine: Path, bin_dir: Path) -> list[str]:
    """The unpacked wheel's console scripts (pip would have made them), run by this python3. A name
    that is not a plain file name, or a target that is not `dotted.module:dotted.attr`, is skipped
    with a warning: nothing is written outside bin/, and no text from the wheel becomes code."""
    import configparser

    bin_dir.mkdir(mode=0o700, exist_ok=True)
    bfd = os.open(bin_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    made = []
    try:
        for entry_points in engine.glob("*.dist-info/entry_points.txt"):
            cp = configparser.ConfigParser(interpolation=None)
            try:
                cp.read(entry_points, encoding="utf-8")
            except (configparser.Error, UnicodeDecodeError) as e:
                print(
                    f"warning: {entry_points}: unreadable ({type(e).__name__}); no console scripts from it",
                    file=sys.stderr,
                )
                continue
            for name, target in cp["console_scripts"].items() if cp.has_section("console_scripts") else []:
                module, _, attr = target.split("[")[0].strip().partition(":")
                if (
                    not SCRIPT_NAME.fullmatch(name)
                    or name in (".", "..")
                    or not DOTTED.fullmatch(module)
                    or not DOTTED.fullmatch(attr)
                ):
                    print(
                        f"warning: {entry_points}: console script {ascii(name)[:80]} = {ascii(target)[:80]} skipped (not a plain name and a module:attr target)",
                        file=sys.stderr,
                    )
                    continue
                first, _, rest = attr.partition(".")
                call = first + "".join(f".{a}" for a in rest.split(".") if a)
                # the guard matters: engines start workers with multiprocessing's spawn, which
                # re-imports the main module; without it each worker would run the CLI again
                text = (
                    f"#!{sys.executable}\nimport sys\nfrom {module} import {first}\n\n"
                    f"if __name__ == '__main__':\n    sys.exit({call}())\n"
                )
                _write_new(bfd, name, text.encode(), mode=0o755)
                made.append(name)
    finally:
        os.close(bfd)
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pieces_dir", type=Path, nargs="?", help="folder holding pieces.json and some of its pieces")
    ap.add_argument("--into", type=Path, help="where the payload collects (default: see --where)")
    ap.add_argument("--where", action="store_true", help="print the folder the payload collects in, and stop")
    ap.add_argument(
        "--installed", action="store_true", help="print the verified env.sh of an installed payload (exit 1 if none)"
    )
    args = ap.parse_args(argv)
    try:
        into = args.into or default_into()
        if args.where:
            print(into)
            return 0
        if args.installed:
            dfd = private_dir(into)
            try:
                env = installed_env(into, dfd)
            finally:
                os.close(dfd)
            if env is None:
                return fail(
                    f"no payload is installed in {into}", help="run receive.py on the pieces until it says installed"
                )
            print(env)
            return 0
        if args.pieces_dir is None:
            ap.error("PIECES_DIR is required (or --where / --installed)")
        return receive(args.pieces_dir, into)
    except Refused as e:
        return fail(str(e), e.help, e.code)
    except (OSError, tarfile.TarError) as e:
        return fail(str(e), help="check the folder and the pieces, then run this again")
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
