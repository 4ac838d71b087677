"""The Kimi K3 stale-extension check: "The MMQ expert-id fix lives in a .cuh, and a stale
extension silently zeroes every expert above 255" (SlimServe README, Kimi K3). An extension
built before a .cuh it compiles changed is refused.

    python -m cookbook.image.stale_extension TREE   # exit 1 when _C_stable_libtorch is stale

File times are what a build leaves; the check compares the newest .cuh under TREE/csrc with
every built _C_stable_libtorch*.so under TREE.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cookbook.errors import FAILED, CookbookError

EXTENSION_GLOB = "_C_stable_libtorch*.so"


def check(tree: Path) -> str:
    """A one-line verdict when the extension is current; CookbookError (exit 1) when not."""
    tree = Path(tree)
    headers = sorted((tree / "csrc").rglob("*.cuh")) if (tree / "csrc").is_dir() else []
    if not headers:
        raise CookbookError(f"no .cuh under {tree / 'csrc'}", help="point the check at the fork's source tree")
    extensions = sorted(p for p in tree.rglob(EXTENSION_GLOB) if p.is_file())
    if not extensions:
        raise CookbookError(
            f"no {EXTENSION_GLOB} under {tree}: the extension was not built from this tree",
            help="build it: uv pip install -e . --torch-backend=auto (C++/HIP changes need the full build)",
            exit_code=FAILED,
        )
    newest = max(headers, key=lambda p: p.stat().st_mtime_ns)
    for ext in extensions:
        if ext.stat().st_mtime_ns < newest.stat().st_mtime_ns:
            raise CookbookError(
                f"{ext.relative_to(tree)} is older than {newest.relative_to(tree)}, which it compiles: a stale "
                "extension silently zeroes every expert above 255 in prefill-width MoE calls (Kimi K3 under "
                "tensor parallel)",
                help="rebuild it from this tree: uv pip install -e . --torch-backend=auto",
                exit_code=FAILED,
            )
    return (
        f"{len(extensions)} extension(s) newer than all {len(headers)} .cuh files (newest {newest.relative_to(tree)})"
    )


if __name__ == "__main__":
    try:
        print(check(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
    except CookbookError as exc:
        print(exc.render(), file=sys.stderr)
        sys.exit(exc.exit_code)
