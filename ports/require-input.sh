#!/usr/bin/env bash
# A port's named build input, checked at the step that needs it:
#   require-input.sh DIR
# `cookbook image` puts each input of ports/<family>/port.yaml under inputs/<name>/ in the build
# context; an input it did not find gets only a MISSING file saying what it is and where it goes.
# The build then stops here, at the step that needs it, with that one message.
set -euo pipefail
dir="$1"
if [ -f "$dir/MISSING" ]; then
    cat "$dir/MISSING" >&2
    exit 2
fi
