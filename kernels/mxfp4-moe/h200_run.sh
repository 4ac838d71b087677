#!/usr/bin/env bash
# One call on the H200 (device tool). Logs and tables go to $OUT.
#   kernels/mxfp4-moe/h200_run.sh probe          real-shape tests, then the shipped tables timed (frag layout)
#                                                and, for the ratio, glm in the converter layout
#   kernels/mxfp4-moe/h200_run.sh tune [BUDGET_S] sweep block sizes (frag), then the vLLM comparison
#   kernels/mxfp4-moe/h200_run.sh confirm        shipped tables with the PyTorch baseline, then vLLM comparison
#   kernels/mxfp4-moe/h200_run.sh tune-gluon [BATCHES] [BUDGET_S]  breakdown, then sweep the Gluon kernels' settings
#   kernels/mxfp4-moe/h200_run.sh ab "SPEC" [BATCHES] [TESTS]  real-shape tests (pytest -k TESTS, default all),
#                                                then bench.py --ab SPEC at BATCHES (1-8 tokens)
# The vLLM comparison needs .carry/tk (triton_kernels from the vllm==0.26.0 wheel) carried.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src" TRITON_CACHE_DIR=/tmp/mxfp4-moe-triton-cache
out="${OUT:?set OUT}"
mode="${1:-confirm}"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > "$out/gpu.txt"
cat "$out/gpu.txt"
compare() {
  [[ -d .carry/tk/triton_kernels ]] || { echo "no .carry/tk: vLLM comparison skipped"; return; }
  timeout "$1" python3 benchmarks/mxfp4_moe/compare_vllm.py --triton-kernels .carry/tk --variants glm,k3 \
    --batches 1,2,4,8,16,64 2>&1 | grep -v '^  \|^Traceback' | tee "$out/compare-vllm.log"
}
case "$mode" in
  probe)
    timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels tests/benchmarks/mxfp4_moe -x 2>&1 | tail -15 | tee "$out/pytest-h200.log"
    timeout 150 python3 benchmarks/mxfp4_moe/bench.py --no-baseline --batches 1,2,4,8,16,64 --out "$out/frag" 2>&1 | tee "$out/bench-frag.log"
    timeout 60 python3 benchmarks/mxfp4_moe/bench.py --no-baseline --layout converter --variants glm --batches 1,8,64 2>&1 | tee "$out/bench-converter.log"
    ;;
  tune)
    timeout 80 python3 benchmarks/mxfp4_moe/breakdown.py --variants glm --batches 1,8,64 2>&1 | tee "$out/breakdown.log"
    timeout 40 python3 benchmarks/mxfp4_moe/breakdown.py --layout converter --variants glm --batches 1,8 2>&1 | tee -a "$out/breakdown.log"
    timeout 330 python3 benchmarks/mxfp4_moe/bench.py --no-baseline --tune --budget-s "${2:-200}" --out "$out/tuned" 2>&1 | tee "$out/bench-tune.log"
    cp "$out"/tuned/{glm,dsv4,k3}.json src/cookbook/kernels/mxfp4_moe/configs/ 2>/dev/null
    compare 100
    ;;
  confirm)
    timeout 320 python3 -m pytest -q -p no:cacheprovider tests/kernels tests/benchmarks/mxfp4_moe 2>&1 | tail -15 | tee "$out/pytest-h200.log"
    timeout 280 python3 benchmarks/mxfp4_moe/bench.py --out "$out/confirm" 2>&1 | tee "$out/bench.log"
    compare 130
    ;;
  tune-gluon)
    G="kernel:gluon,decoder:asm,block_t:8,block_n1:64,warps1:4,block_n2:64,warps2:4,block_k1:128,block_k2:128,prefetch:1"
    timeout 60 python3 benchmarks/mxfp4_moe/breakdown.py --variants glm,dsv4 --batches 1,8 --set "$G" 2>&1 \
      | grep -v Warn | tee "$out/breakdown.log"
    timeout 420 python3 benchmarks/mxfp4_moe/bench.py --no-baseline --tune --kernel gluon --tune-batches "${2:-1,2,4,8,16,64}" \
      --budget-s "${3:-300}" --batches 1,2,4,8,16,32,64 --out "$out/tuned" 2>&1 | tee "$out/bench-tune.log"
    ;;
  ab)
    timeout 240 python3 -m pytest -q -p no:cacheprovider tests/kernels tests/benchmarks/mxfp4_moe ${4:+-k "$4"} 2>&1 | tail -15 | tee "$out/pytest-h200.log"
    timeout 300 python3 benchmarks/mxfp4_moe/bench.py --no-baseline --batches "${3:-1,2,4,8}" --ab "$2" \
      --out "$out/ab" 2>&1 | tee "$out/bench-ab.log"
    ;;
  *) echo "h200_run.sh: unknown mode $mode (probe, tune, confirm, tune-gluon, ab)" >&2; exit 2 ;;
esac
python3 benchmarks/mxfp4_moe/sass_summary.py "$TRITON_CACHE_DIR" > "$out/sass-summary.txt" 2>&1
