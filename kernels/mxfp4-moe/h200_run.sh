#!/usr/bin/env bash
# One call on the H200 (device tool): real-shape tests, tuned benchmark, then the vLLM
# triton_kernels comparison with the freshly tuned tables. Logs and tables go to $OUT.
#   kernels/mxfp4-moe/h200_run.sh [TUNE_BUDGET_S]      (needs .carry/tk carried for the comparison)
#   TUNE_BUDGET_S=0: no sweep, benchmark the shipped tables (a confirmation run)
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src" TRITON_CACHE_DIR=/tmp/mxfp4-moe-triton-cache
out="${OUT:?set OUT}"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > "$out/pytest-h200.log"
timeout 110 python3 -m pytest -q -p no:cacheprovider tests/kernels 2>&1 | tail -25 >> "$out/pytest-h200.log"
budget="${1:-170}"
tune=(--tune --budget-s "$budget"); [[ "$budget" == 0 ]] && tune=()
timeout 300 python3 kernels/mxfp4-moe/bench.py "${tune[@]}" --out "$out/tuned" 2>&1 | tee "$out/bench.log"
cp "$out"/tuned/{glm,dsv4,k3}.json src/cookbook/kernels/mxfp4_moe/configs/ 2>/dev/null
if [[ -d .carry/tk/triton_kernels ]]; then
  timeout 100 python3 kernels/mxfp4-moe/compare_vllm.py --triton-kernels .carry/tk --variants glm,k3 \
    --batches 1,2,4,8,16,64 2>&1 | grep -v '^  \|^Traceback' | tee "$out/compare-vllm.log"
fi
python3 kernels/mxfp4-moe/sass_summary.py "$TRITON_CACHE_DIR" > "$out/sass-summary.txt" 2>&1
cat "$out/pytest-h200.log"
