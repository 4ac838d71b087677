#!/usr/bin/env bash
# SlimServe's own image check: the Kimi K3 stale-extension defect. "The MMQ expert-id fix
# lives in a .cuh, and a stale extension silently zeroes every expert above 255" (SlimServe
# README, Kimi K3). Fails when _C_stable_libtorch is older than any .cuh under csrc/.
set -euo pipefail
exec python3 -m cookbook.image.stale_extension /opt/slimserve
