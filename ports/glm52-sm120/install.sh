#!/usr/bin/env bash
# The fork's install steps (inside the build): a venv, the fork from source for SM120, the cookbook.
set -euo pipefail
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-dev git build-essential
rm -rf /var/lib/apt/lists/*
python3 -m venv /opt/venv
cd /opt/vllm-glm52-sm120
pip install --no-cache-dir -e .
pip install --no-cache-dir -e /opt/cookbook
