#!/usr/bin/env bash
# Start the server with the recipe's launch block: /opt/cookbook/launch.sh is the block
# `cookbook launch SLUG` printed when the image was built, byte for byte. The checkpoint is a
# volume (CHECKPOINT_DIR, default /models/checkpoint); vLLM's compile cache is /cache.
#   docker run --network host --shm-size 2g -v MODEL_DIR:/models/checkpoint:ro -v CACHE:/cache cookbook/SLUG:TAG
# Any arguments replace the server: `docker run ... cookbook/SLUG:TAG cookbook fixes check ...`.
# -e COOKBOOK_PORT=N serves on port N instead (for a host where the recipe's port is taken): the
# block is then `cookbook launch SLUG --set port=N`, rendered in the image; only the port differs.
set -euo pipefail
if [ "$#" -gt 0 ]; then
    exec "$@"
fi
if [ ! -f "$CHECKPOINT_DIR/config.json" ]; then
    echo "error: no checkpoint at $CHECKPOINT_DIR (config.json missing)" >&2
    echo "  help: mount the converted checkpoint: -v /path/to/checkpoint:$CHECKPOINT_DIR:ro" >&2
    exit 2
fi
if [ -n "${COOKBOOK_PORT:-}" ]; then
    cookbook launch "${COOKBOOK_RECIPE:?}" --set "port=$COOKBOOK_PORT" > /tmp/launch.sh
    exec bash /tmp/launch.sh
fi
exec bash /opt/cookbook/launch.sh
