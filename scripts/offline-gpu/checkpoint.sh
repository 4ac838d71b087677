# Sourced by scripts/offline-gpu/engine-check and side-by-side (not run): the card a job runs on, and
# the engine check's random-weight checkpoint at a depth that fits it. Needs $root and PYTHONPATH set.

ckdir="$root/.cache/engine-check/ckpt"  # git-ignored: both scripts share the checkpoints

# write_env FILE: the card (nvidia-smi: name, driver, memory), torch and vLLM, and torch's total
# memory (what vLLM multiplies by gpu_memory_utilization, a little under nvidia-smi's)
write_env() {
  echo "env: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)" > "$1"
  python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)" >> "$1" 2>&1
  python3 -c "import torch; print('device_mib', torch.cuda.mem_get_info()[1] >> 20)" >> "$1" 2>&1
}

# ck_path CONFIG LAYERS: the checkpoint folder of CONFIG (a repository path) at LAYERS layers
ck_path() { echo "$ckdir/$(basename "$(dirname "$1")")-$(basename "$(dirname "$(dirname "$1")")")-$2l"; }

# layers_of CONFIG: its num_hidden_layers
layers_of() { python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["num_hidden_layers"]))' "$1"; }

# checkpoint_for SLUG CONFIG ENV DIR LOG: DIR/config.json is CONFIG, or CONFIG at the most layers that
# fit the card ENV names (cookbook maint engine-check fit: the 8-layer GLM-5.2 FP8 checkpoint runs out
# of memory on an H100 while vLLM fills its random weights); prints the checkpoint folder, made when
# absent. Returns 1, its reason in LOG, when no depth fits or the checkpoint cannot be made.
checkpoint_for() {
  local slug="$1" config="$2" env="$3" d="$4" log="$5" layers ck
  mkdir -p "$d"
  python3 -m cookbook.cli maint engine-check fit "$slug" "$config" --env "$env" --write "$d/config.json" >> "$log" 2>&1 \
    || return 1
  layers=$(layers_of "$d/config.json") || return 1
  ck="$(ck_path "$config" "$layers")"
  if [[ ! -f "$ck/config.json" ]]; then
    python3 -m cookbook.cli convert dummy-checkpoint "$(python3 -c 'from cookbook.models import gemma; print(gemma.gguf_path())')" \
      "$d/config.json" "$ck" >> "$log" 2>&1 || return 1
  fi
  echo "$ck"
}
