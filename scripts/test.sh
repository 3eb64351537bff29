#!/usr/bin/env bash
# The test command: installs dependencies, builds (Release, -Werror) and runs every test,
# including the installed-package consumer check.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --preset release -j "$(nproc)"
