#!/usr/bin/env bash
# One command: install, then run the main job on the embedded default model (no key, no network).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh runtime
. .venv/bin/activate
exec porchestra run "Use Python to compute 17 * 23, then report the number." \
  --answer 391 --global-steps 10 --worker-steps 4 --out "runs/demo-$(date +%Y%m%d-%H%M%S)" "$@"
