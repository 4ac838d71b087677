#!/usr/bin/env bash
# SlimServe's install steps (inside the build, in /opt/slimserve): the document's build, then
# QuixiCore-rocm on MI300X, then the cookbook. `uv` comes from PyPI (pip install uv).
set -euo pipefail
python3 -m pip install --no-cache-dir uv
uv venv --python 3.12
# shellcheck disable=SC1091
source .venv/bin/activate
uv pip install -r requirements/lint.txt
# C++/HIP changes need the full build: this builds _C_stable_libtorch from the tree, after the
# .cuh files it compiles (ports/slimserve/check.sh refuses an extension older than one of them).
uv pip install -e . --torch-backend=auto
if [ "${PLATFORM:?}" = mi300x ]; then
    /opt/cookbook/ports/require-input.sh /opt/quixicore-rocm
    uv pip install /opt/quixicore-rocm
fi
uv pip install -e /opt/cookbook
