#!/usr/bin/env bash
# One command: install everything the tests need, then run the fast test suite.
# Extra arguments go to pytest (e.g. `scripts/test.sh -m slow` for the slow suite).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh dev
. .venv/bin/activate
if [ $# -eq 0 ]; then set -- -m "not slow"; fi
exec python -m pytest -q -p no:cacheprovider "$@"
