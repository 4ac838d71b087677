#!/usr/bin/env bash
# The fork's serving modes as the GLM-5.2 NVFP4 README gives them, each one a recipe of this
# cookbook; the server starts from that recipe's launch block (`cookbook launch`):
#   PARALLEL=tp4-1m-mtp (default)  recipes/glm52-nvfp4-4x-rtxpro6000
#   PARALLEL=tp4-1m                recipes/glm52-nvfp4-4x-rtxpro6000-tp4-1m
#   PARALLEL=tp4-dspark            recipes/glm52-nvfp4-4x-rtxpro6000-tp4-dspark
#   NUM_SPEC=N                     speculative tokens (the MTP modes tune 3)
#   ENABLE_TOOLS=0                 tool calling off
# Arguments replace the server: docker run ... glm52-sm120 cookbook fixes list
set -euo pipefail
if [ "$#" -gt 0 ]; then
    exec "$@"
fi
case "${PARALLEL:-tp4-1m-mtp}" in
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
    sets+=(--set "serve.args.speculative_config.num_speculative_tokens=$NUM_SPEC")
fi
if [ "${ENABLE_TOOLS:-1}" = 0 ]; then
    sets+=(--set "enable_auto_tool_choice=false" --set "tool_call_parser=null")
fi
cookbook launch "$slug" "${sets[@]}" > /tmp/launch.sh
exec bash /tmp/launch.sh
