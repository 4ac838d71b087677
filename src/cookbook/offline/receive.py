"""Receive an offline payload on a host that reaches no registry, one piece per transfer.

Runs there with the host's bare python3: standard library only, and nothing else from the
cookbook is imported, so it works before the engine or the cookbook's dependencies exist.

    python3 src/cookbook/offline/receive.py PIECES_DIR [--into DIR]

PIECES_DIR holds `pieces.json` (written by `cookbook offline pack`) and any subset of the
pieces it lists. Each call appends the pieces present, in order, to DIR/payload.tar, each
checked against its sha256 before it is appended; a piece already received is skipped, and
a piece that arrives before its predecessor waits in DIR until the gap is filled. When the
last piece is in, the whole payload is checked and unpacked:

    DIR/engine/   the engine's wheel, unpacked (PYTHONPATH entry)
    DIR/site/     every carried wheel, installed with pip --target --no-deps (PYTHONPATH entry)

and DIR/env.sh exports PYTHONPATH for both, and for the folders the carried .pth files add.
The exit is 0 with a line saying how many pieces are still missing, 1 when a piece or the
whole payload fails its checksum.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

CHUNK = 1 << 20


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def fail(msg: str, help: str = "") -> int:
    print(f"error: {msg}", file=sys.stderr)
    if help:
        print(f"  help: {help}", file=sys.stderr)
    return 1


def receive(pieces_dir: Path, into: Path) -> int:
    manifest = json.loads((pieces_dir / "pieces.json").read_text(encoding="utf-8"))
    into.mkdir(parents=True, exist_ok=True)
    state_path = into / "received.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {"payload": manifest["sha256"], "done": 0}
    if state["payload"] != manifest["sha256"]:
        return fail(
            f"{into} holds pieces of another payload ({state['payload'][:12]}, not {manifest['sha256'][:12]})",
            help=f"remove {into} and send the pieces again",
        )
    payload = into / "payload.tar"
    # Stage what arrived (pieces can come in any order; only the next one is appended).
    for piece in manifest["pieces"][state["done"] :]:
        src = pieces_dir / piece["name"]
        if src.exists() and not (into / piece["name"]).exists():
            if sha256(src) != piece["sha256"]:
                return fail(f"{src}: sha256 mismatch", help="make the pieces again with `cookbook offline pack`")
            shutil.copyfile(src, into / f".{piece['name']}.part")
            os.replace(into / f".{piece['name']}.part", into / piece["name"])
    while state["done"] < len(manifest["pieces"]):
        piece = manifest["pieces"][state["done"]]
        staged = into / piece["name"]
        if not staged.exists():
            break
        with payload.open("ab") as out, staged.open("rb") as f:
            out.truncate(piece["offset"])  # an append cut short by a kill is redone, not doubled
            out.seek(piece["offset"])
            shutil.copyfileobj(f, out, CHUNK)
        staged.unlink()
        state["done"] += 1
        state_path.write_text(json.dumps(state))
        print(f"received {piece['name']} ({piece['size'] / 2**20:.1f} MiB)", flush=True)
    missing = len(manifest["pieces"]) - state["done"]
    if missing:
        print(f"{missing} of {len(manifest['pieces'])} pieces still to come", flush=True)
        return 0
    if (into / "env.sh").exists():
        print(f"payload complete and installed; source {into / 'env.sh'}", flush=True)
        return 0
    if sha256(payload) != manifest["sha256"]:
        return fail(f"{payload}: the joined payload fails its sha256", help=f"remove {into} and send the pieces again")
    return install(payload, into)


def install(payload: Path, into: Path) -> int:
    unpacked = into / "payload"
    with tarfile.open(payload) as tar:
        tar.extractall(unpacked, filter="data")
    payload.unlink()
    contents = json.loads((unpacked / "contents.json").read_text(encoding="utf-8"))
    engine = into / "engine"
    engine.mkdir(exist_ok=True)
    with tarfile.open(unpacked / contents["engine"]) as tar:
        tar.extractall(engine, filter="data")
    wheels = sorted(str(p) for p in (unpacked / "wheels").glob("*.whl"))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    pip += ["--no-cache-dir", "--upgrade", "--target", str(into / "site"), *wheels]
    if subprocess.run(pip).returncode != 0:
        return fail(f"pip could not install the {len(wheels)} carried wheels into {into / 'site'}")
    shutil.rmtree(unpacked)
    scripts = console_scripts(engine, into / "bin")
    path = ":".join([str(into / "site"), *pth_paths(into / "site"), str(engine)])
    (into / "env.sh").write_text(
        f'export PYTHONPATH="{path}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
        f'export PATH="{into / "bin"}:{into / "site" / "bin"}:$PATH"\n'
    )
    print(f"console scripts: {', '.join(scripts) or 'none'}", flush=True)
    print(f"installed {contents['engine_name']} and {len(wheels)} wheels; source {into / 'env.sh'}", flush=True)
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
    return json.loads(run.stdout.strip().splitlines()[-1])


def console_scripts(engine: Path, bin_dir: Path) -> list[str]:
    """The unpacked wheel's console scripts (pip would have made them), run by this python3."""
    import configparser

    bin_dir.mkdir(exist_ok=True)
    made = []
    for entry_points in engine.glob("*.dist-info/entry_points.txt"):
        cp = configparser.ConfigParser()
        cp.read(entry_points)
        for name, target in cp["console_scripts"].items() if cp.has_section("console_scripts") else []:
            module, _, attr = target.partition(":")
            script = bin_dir / name
            # the guard matters: engines start workers with multiprocessing's spawn, which
            # re-imports the main module; without it each worker would run the CLI again
            script.write_text(
                f"#!{sys.executable}\nimport sys\nfrom {module} import {attr}\n\n"
                f"if __name__ == '__main__':\n    sys.exit({attr}())\n"
            )
            script.chmod(0o755)
            made.append(name)
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pieces_dir", type=Path, help="folder holding pieces.json and some of its pieces")
    ap.add_argument("--into", type=Path, default=Path("/tmp/cookbook-offline"), help="where the payload collects")
    args = ap.parse_args(argv)
    if not (args.pieces_dir / "pieces.json").is_file():
        return fail(f"{args.pieces_dir}: no pieces.json", help="carry the folder `cookbook offline pack` wrote")
    return receive(args.pieces_dir, args.into)


if __name__ == "__main__":
    sys.exit(main())
