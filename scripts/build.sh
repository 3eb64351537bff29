#!/usr/bin/env bash
# Configures and builds ddpio (Release, warnings as errors) into build/release.
# Usage: scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release "$@" >/dev/null
cmake --build --preset release -j "$(nproc)"
