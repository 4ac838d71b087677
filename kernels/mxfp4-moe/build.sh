#!/usr/bin/env bash
# Select and validate the fused MXFP4 MoE kernel's shapes and tuned block sizes for one
# model family, print the table the kernel loads (and write it with --out FILE).
#   kernels/mxfp4-moe/build.sh --variant glm|dsv4|k3 [--backend sm90|hpu] [--out FILE] [--config FILE] [--warm]
# --backend is the platform's (the recipe's hardware.platform picks it): sm90 (NVIDIA Hopper, the
# default) is Triton (JIT): nothing to compile ahead; --warm compiles on a GPU. hpu (Gaudi) is not
# in this repository: it stops with a message saying so and builds nothing.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="${PYTHON:-}"
if [[ -z "$py" ]]; then
  if [[ -x "$root/.venv/bin/python" ]]; then py="$root/.venv/bin/python"; else py="python3"; fi
fi
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" -m cookbook.kernels.mxfp4_moe.build "$@"
