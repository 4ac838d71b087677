#!/usr/bin/env bash
# Run a recipe's gate suite against a live server and write an evidence bundle.
#
#   gates/run.sh RECIPE [--base-url URL] [other `cookbook gates run` options...]
#
# The server's address is --base-url URL, as `cookbook gates run` takes it (default
# http://127.0.0.1:8000). The old spelling, a bare URL right after RECIPE, still works and
# prints a note. Gate data: `cookbook gates run` reads $COOKBOOK_DATA, else .cache/data
# (`cookbook maint data fetch` fills it); see gates/README.md. When the server is local and
# $COOKBOOK_SERVING_PYTHON (default: the repo's .venv) has vLLM, its `pip freeze` is recorded
# as the environment lock; against a container, pass --image cookbook/<slug>:<tag> and the
# bundle records that image's ID and digest instead. A server that does not answer is one
# error and no bundle.
set -euo pipefail

usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; }  # the header above
if [[ $# -lt 1 ]]; then
  usage >&2
  exit 2
fi
if [[ "$1" == -h || "$1" == --help ]]; then
  usage
  exit 0
fi
recipe=$1; shift
base_url=http://127.0.0.1:8000
if [[ $# -gt 0 && "$1" != -* ]]; then
  echo "note: a URL after RECIPE is the old spelling; write --base-url $1 (as \`cookbook gates run\` takes it)" >&2
  base_url=$1; shift
fi
rest=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base-url)
      if [[ $# -lt 2 ]]; then echo "error: --base-url needs a URL" >&2; echo "  help: gates/run.sh RECIPE --base-url http://127.0.0.1:8000" >&2; exit 2; fi
      base_url=$2; shift 2 ;;
    --base-url=*) base_url=${1#--base-url=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) rest+=("$1"); shift ;;
  esac
done

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cookbook=(cookbook)
[[ -x "$repo/.venv/bin/cookbook" ]] && cookbook=("$repo/.venv/bin/cookbook")

env_args=()
serving_python=${COOKBOOK_SERVING_PYTHON:-$repo/.venv/bin/python}
case "$base_url" in
  http://127.0.0.1:*|http://localhost:*|http://0.0.0.0:*)
    if [[ " ${rest[*]-} " != *" --env-lock"* && " ${rest[*]-} " != *" --image"* ]] \
       && "$serving_python" -c 'import importlib.util,sys; sys.exit(importlib.util.find_spec("vllm") is None)' 2>/dev/null; then
      env_args=(--env-lock-cmd "$serving_python -m pip freeze --all")
    fi ;;
esac

# The gate-data default is computed once, in `cookbook gates run` (cookbook.gates.data.default_data_dir).
exec "${cookbook[@]}" gates run "$recipe" --base-url "$base_url" "${env_args[@]}" "${rest[@]}"
