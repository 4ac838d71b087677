#!/usr/bin/env python3
"""Apply a fix profile to the installed vLLM: the entry point launch blocks call.

    python3 "$COOKBOOK/fixes/apply_all.py" --profile v0.30.0 [OPT_IN ...] [--target DIR] [--check|--replace]

Same as `cookbook fixes apply` (or `check` with --check), for images where the cookbook
package is not installed: it imports the package from this checkout's src/. Exits
non-zero when the target is not the profile's pinned vLLM or any fix does not apply.
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cookbook.fixes import tree  # noqa: E402
from cookbook.fixes.pack import FixError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", required=True, help="fix profile (fixes/profiles/<name>.yaml)")
    ap.add_argument("opt_in", nargs="*", metavar="OPT_IN", help="opt-in fixes to include")
    ap.add_argument(
        "--target", type=Path, default=None, help="vllm package directory (default: the one this python imports)"
    )
    ap.add_argument("--check", action="store_true", help="only verify; non-zero on drift")
    ap.add_argument("--replace", action="store_true", help="first revert a different fix set on the target")
    args = ap.parse_args(argv)
    # The installed one is this interpreter's: a launch block runs this with the engine's python.
    os.environ.setdefault("COOKBOOK_ENGINE_PYTHON", sys.executable)
    try:
        target = args.target if args.target is not None else tree.default_target()
        if args.check:
            outcome = tree.check(args.profile, args.opt_in, target)
        else:
            outcome = tree.apply(args.profile, args.opt_in, target, replace=args.replace)
    except FixError as e:
        print(f"apply_all: error: {e}", file=sys.stderr)
        return 1
    for line in outcome.lines:
        print(line)
    print(f"fix set hash: {outcome.set_hash}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
