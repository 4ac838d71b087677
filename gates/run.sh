#!/usr/bin/env bash
# Run a recipe's gate suite against a live server and write an evidence bundle.
#
#   gates/run.sh RECIPE [BASE_URL] [extra `cookbook gates run` options...]
#
# BASE_URL defaults to http://127.0.0.1:8000. Gate data: `cookbook gates run` reads
# $COOKBOOK_DATA, else .cache/data (`cookbook maint data fetch` fills it); see gates/README.md.
# When the server is local and $COOKBOOK_SERVING_PYTHON (default: the repo's .venv) has
# vLLM, its `pip freeze` is recorded as the environment lock; against a container, pass
# --image cookbook/<slug>:<tag> and the bundle records that image's ID and digest instead.
set -euo pipefail

if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
recipe=$1; shift
base_url=http://127.0.0.1:8000
if [[ $# -gt 0 && "$1" != -* ]]; then base_url=$1; shift; fi

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cookbook=(cookbook)
[[ -x "$repo/.venv/bin/cookbook" ]] && cookbook=("$repo/.venv/bin/cookbook")

env_args=()
serving_python=${COOKBOOK_SERVING_PYTHON:-$repo/.venv/bin/python}
case "$base_url" in
  http://127.0.0.1:*|http://localhost:*|http://0.0.0.0:*)
    if [[ " $* " != *" --env-lock"* && " $* " != *" --image"* ]] \
       && "$serving_python" -c 'import importlib.util,sys; sys.exit(importlib.util.find_spec("vllm") is None)' 2>/dev/null; then
      env_args=(--env-lock-cmd "$serving_python -m pip freeze --all")
    fi ;;
esac

# The gate-data default is computed once, in `cookbook gates run` (cookbook.gates.data.default_data_dir).
exec "${cookbook[@]}" gates run "$recipe" --base-url "$base_url" "${env_args[@]}" "$@"
