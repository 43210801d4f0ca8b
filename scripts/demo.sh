#!/usr/bin/env bash
# One command: install, then run the main job on the embedded default model (no key, no network):
# a held-out shop task of the miniature's testbed, solved by local:porchestra-mini (SmolLM2-135M plus
# the LoRA adapter trained by `python -m porchestra.miniature`): it delegates with the cart tools, the
# worker hits a revoked tool and asks for its replacement, the orchestrator revises the live harness,
# the same worker finishes, and the checker scores the cart and the total (docs/miniature.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh runtime
. .venv/bin/activate
exec porchestra run testbed-heldout-37 --env testbed --out "runs/demo-$(date +%Y%m%d-%H%M%S)" "$@"
