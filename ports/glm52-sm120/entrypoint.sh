#!/usr/bin/env bash
# The fork's serving modes as the GLM-5.2 NVFP4 README gives them, each one a recipe of this
# cookbook; the server starts from that recipe's launch block (`cookbook launch`):
#   PARALLEL=tp4-1m-mtp (default)  recipes/glm52-nvfp4-4x-rtxpro6000
#   PARALLEL=tp4-1m                recipes/glm52-nvfp4-4x-rtxpro6000-tp4-1m
#   PARALLEL=tp4-dspark            recipes/glm52-nvfp4-4x-rtxpro6000-tp4-dspark
#   NUM_SPEC=N                     speculative tokens of the modes that speculate (tp4-1m does not)
#   ENABLE_TOOLS=0                 tool calling off
# Arguments replace the server: docker run ... glm52-sm120 cookbook fixes list
set -euo pipefail
if [ "$#" -gt 0 ]; then
    exec "$@"
fi
PARALLEL="${PARALLEL:-tp4-1m-mtp}"
case "$PARALLEL" in
    tp4-1m-mtp) slug=glm52-nvfp4-4x-rtxpro6000 ;;
    tp4-1m) slug=glm52-nvfp4-4x-rtxpro6000-tp4-1m ;;
    tp4-dspark) slug=glm52-nvfp4-4x-rtxpro6000-tp4-dspark ;;
    *)
        echo "error: PARALLEL=$PARALLEL is not a serving mode of this image" >&2
        echo "  help: -e PARALLEL=tp4-1m-mtp (default), tp4-1m or tp4-dspark" >&2
        exit 2
        ;;
esac
sets=()
if [ -n "${NUM_SPEC:-}" ]; then
    if [ "$PARALLEL" = tp4-1m ]; then
        echo "error: NUM_SPEC=$NUM_SPEC: PARALLEL=tp4-1m does not speculate" >&2
        echo "  help: drop NUM_SPEC, or use PARALLEL=tp4-1m-mtp or tp4-dspark" >&2
        exit 2
    fi
    sets+=(--set "serve.args.speculative_config.value.num_speculative_tokens=$NUM_SPEC")
fi
if [ "${ENABLE_TOOLS:-1}" = 0 ]; then
    sets+=(--set "enable_auto_tool_choice=false" --set "tool_call_parser=null")
fi
cookbook launch "$slug" "${sets[@]}" > /tmp/launch.sh
exec bash /tmp/launch.sh
