#!/usr/bin/env bash
# The last step of every port's Dockerfile: the image proves its own fix pack.
#   check-image.sh    (FIX_PROFILE and FIX_OPT_IN from the build args; COOKBOOK set)
# Runs `cookbook fixes check` for the recipe's fix set; a recipe without a fix profile says so.
# A port may add its own checks in ports/<family>/check.sh (slimserve: the stale-extension check).
set -euo pipefail
port_check="$COOKBOOK/ports/${PORT:?}/check.sh"
if [ -n "${FIX_PROFILE:-}" ]; then
    opt=()
    for name in ${FIX_OPT_IN:-}; do opt+=(--opt-in "$name"); done
    cookbook fixes check --profile "$FIX_PROFILE" "${opt[@]}"
else
    echo "cookbook fixes check: the recipe names no fix profile; nothing to check"
fi
if [ -x "$port_check" ]; then
    "$port_check"
fi
