#!/usr/bin/env bash
# The vllm-cuda port's install step, run inside the build on vLLM's own image (its python3 holds
# vLLM at the recipe's pin): the cookbook into that interpreter, then the recipe's fix profile
# applied to the vLLM it imports. FIX_PROFILE and FIX_OPT_IN come from the recipe (build args).
set -euo pipefail
python3 -c "import vllm; print('vllm', vllm.__version__)"
python3 -m pip install --no-cache-dir -e /opt/cookbook
if [ -n "${FIX_PROFILE:-}" ]; then
    opt=()
    for name in ${FIX_OPT_IN:-}; do opt+=(--opt-in "$name"); done
    cookbook fixes apply --profile "$FIX_PROFILE" "${opt[@]}"
else
    echo "the recipe names no fix profile; stock vLLM as the image has it"
fi
