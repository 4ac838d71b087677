#!/usr/bin/env bash
# The glm-5-mxfp4 port's install steps, one per build step of ports/glm-5-mxfp4/Dockerfile:
#   install.sh cookbook|commits|fixes|glm5_hpu|patches|kernels
# Run inside the stock vllm-gaudi releases/v0.30.0 image, with COOKBOOK=/opt/gaudi-cookbook.
set -euo pipefail
port="$COOKBOOK/ports/glm-5-mxfp4"
inputs=/opt/inputs
die() { printf 'error: %s\n' "$1" >&2; [ -n "${2:-}" ] && printf '  help: %s\n' "$2" >&2; exit 2; }

commit_of() {  # $1 = python distribution; the git commit in its version or its checkout
    python3 - "$1" <<'PY'
import sys, importlib.metadata as md, json, pathlib
dist = md.distribution(sys.argv[1])
direct = dist.read_text("direct_url.json")
if direct and "vcs_info" in direct:
    print(json.loads(direct)["vcs_info"].get("commit_id", ""))
else:
    print(dist.version)
PY
}

case "${1:?step}" in
cookbook)
    python3 -m pip install --no-cache-dir -e "$COOKBOOK"
    ;;
commits)
    # "vllm-gaudi releases/v0.30.0 at 058f107, vLLM ced6857a" (GLM-5.2 (MXFP4), Image)
    for pair in "vllm-gaudi:${VLLM_GAUDI_COMMIT:?}" "vllm:${VLLM_COMMIT:?}"; do
        dist="${pair%%:*}" want="${pair#*:}"
        have="$(commit_of "$dist" 2>/dev/null)" || die "$dist is not installed in the base image" \
            "BASE must be the stock vllm-gaudi releases/v0.30.0 image (docker/gaudi/base.yaml)"
        case "$have" in
        *"$want"*) echo "$dist at $want" ;;
        *) die "$dist in the base image is $have, not commit $want" \
            "build the base from vllm-gaudi releases/v0.30.0 at $VLLM_GAUDI_COMMIT (vLLM $VLLM_COMMIT)" ;;
        esac
    done
    ;;
fixes)
    # shellcheck disable=SC2086  # FIX_OPT_IN is a list of names
    python3 "$COOKBOOK/fixes/apply_all.py" --profile "${FIX_PROFILE:?}" ${FIX_OPT_IN:-}
    ;;
glm5_hpu)
    "$COOKBOOK/ports/require-input.sh" "$inputs/glm5_hpu"
    python3 -m pip install --no-cache-dir "$inputs/glm5_hpu"
    ;;
patches)
    "$COOKBOOK/ports/require-input.sh" "$inputs/glm-5-mxfp4-patches"
    target="$(python3 -c 'import vllm_gaudi, pathlib; print(pathlib.Path(vllm_gaudi.__file__).parent.parent)')"
    python3 -m cookbook.image.port_patches "$inputs/glm-5-mxfp4-patches" "$target" --expect "$port/patches/series"
    ;;
kernels)
    # The recipe's kernels entry: mxfp4-moe, variant glm; hardware.platform gaudi2 picks backend hpu.
    "$COOKBOOK/kernels/mxfp4-moe/build.sh" --variant glm --backend hpu
    ;;
*)
    die "unknown step $1" "install.sh cookbook|commits|fixes|glm5_hpu|patches|kernels"
    ;;
esac
