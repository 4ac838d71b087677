"""Import every module of a package on the offline host, and name each module a payload lacks.

A model's kernels import their libraries lazily (inside forward, at CUDA-graph warm-up), so a
missing one shows only minutes into a server start. Importing each module file of the model's
package finds them all in seconds, before the server is started:

    python3 -m cookbook.offline.imports vllm.models.deepseek_v4 --skip amd,xpu

Prints one line per module that fails (its error; for a missing library, the module name it
imported), exit 1 if any failed, 0 with a count otherwise. `--skip` leaves out subpackages
of other platforms (their libraries are not meant to be there). Standard library only, like
scripts/offline-gpu/receive.py: it runs before anything else is known to work.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys


def modules(package: str, skip: set[str]) -> list[str]:
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}.", onerror=lambda _name: None):
        parts = info.name[len(package) + 1 :].split(".")
        if not skip & set(parts):
            names.append(info.name)
    return names


def failures(names: list[str]) -> list[tuple[str, str]]:
    bad = []
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            bad.append((name, f"no module named {e.name!r}"))
        except Exception as e:  # noqa: BLE001 - any import-time failure is what this reports
            bad.append((name, f"{type(e).__name__}: {e}".splitlines()[0]))
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("package", help="a package to import module by module (e.g. vllm.models.deepseek_v4)")
    ap.add_argument("--skip", default="", help="comma-separated subpackage names to leave out (e.g. amd,xpu)")
    args = ap.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    try:
        names = modules(args.package, skip)
    except ImportError as e:
        print(f"error: cannot import {args.package}: {e}", file=sys.stderr)
        print("  help: source the payload's env.sh first (the package must be on PYTHONPATH)", file=sys.stderr)
        return 2
    bad = failures(names)
    for name, why in bad:
        print(f"{name}: {why}")
    if bad:
        print(
            f"error: {len(bad)} of {len(names)} modules of {args.package} do not import\n"
            "  help: carry the missing packages (the recipe's offline.yaml: `extra`, or remove them from `skip`)",
            file=sys.stderr,
        )
        return 1
    print(f"{len(names)} modules of {args.package} import")
    return 0


if __name__ == "__main__":
    sys.exit(main())
