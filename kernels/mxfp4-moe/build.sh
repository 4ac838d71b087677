#!/usr/bin/env bash
# Select and validate the fused MXFP4 MoE kernel's shapes and tuned block sizes for one
# model family, print the table the kernel loads (and write it with --out FILE).
#   kernels/mxfp4-moe/build.sh --variant glm|dsv4|k3 [--out FILE] [--config FILE] [--warm]
# The kernel is Triton (JIT): there is nothing to compile ahead; --warm compiles on a GPU.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="${PYTHON:-}"
if [[ -z "$py" ]]; then
  if [[ -x "$root/.venv/bin/python" ]]; then py="$root/.venv/bin/python"; else py="python3"; fi
fi
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" -m cookbook.kernels.mxfp4_moe.build "$@"
