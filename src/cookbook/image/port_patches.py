"""Apply a port's own patches (a build input) in the order of their series file, after checking
each one's DEP-3 header; the series the document names (--expect) must all be there.

    python -m cookbook.image.port_patches PATCH_DIR TARGET [--expect SERIES]

Patches apply with GNU patch at zero fuzz, each one dry-run first: the fix pack's own applier
(cookbook.fixes) works on the pinned vLLM tree it knows, and a port's patches are against
the vendor's image, which this repository does not hold.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from cookbook.errors import CookbookError
from cookbook.fixes.patchfile import parse_header

DEP3_REQUIRED = ("Description", "Origin", "Last-Update")


def read_series(path: Path) -> list[str]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


def check(patch_dir: Path, expect: Path | None = None) -> list[Path]:
    series_file = patch_dir / "series"
    if not series_file.is_file():
        raise CookbookError(f"no series file in {patch_dir}", help="the patch input holds series and its patches")
    names = read_series(series_file)
    problems = []
    if expect is not None:
        problems += [f"{n}: named by the document, not in {series_file}" for n in read_series(expect) if n not in names]
    patches = []
    for name in names:
        path = patch_dir / name
        if "/" in name or not path.is_file():
            problems.append(f"{name}: listed in the series, not a file of {patch_dir}")
            continue
        header = parse_header(path.read_text(encoding="utf-8", errors="replace").split("\n---", 1)[0].splitlines())
        missing = [k for k in DEP3_REQUIRED if not header.get(k) and not (k == "Description" and header.get("Subject"))]
        if missing:
            problems.append(f"{name}: DEP-3 header lacks {', '.join(missing)}")
        patches.append(path)
    if problems:
        raise CookbookError(
            "port patches refused:\n  " + "\n  ".join(problems),
            help="give every patch a DEP-3 header and list it in series",
        )
    return patches


def apply(patches: list[Path], target: Path) -> None:
    for path in patches:
        for dry in (True, False):
            argv = ["patch", "-p1", "--fuzz=0", "--forward", "-d", str(target), "-i", str(path)]
            done = subprocess.run(argv + (["--dry-run"] if dry else []), capture_output=True, text=True)
            if done.returncode:
                raise CookbookError(
                    f"{path.name} does not apply to {target}:\n{done.stdout}{done.stderr}",
                    help="the base image is not the one the port's patches were written against",
                    exit_code=1,
                )
        print(f"applied {path.name}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="port_patches")
    ap.add_argument("patch_dir", type=Path)
    ap.add_argument("target", type=Path)
    ap.add_argument("--expect", type=Path)
    args = ap.parse_args(argv)
    try:
        apply(check(args.patch_dir, args.expect), args.target)
    except CookbookError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
