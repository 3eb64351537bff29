#!/usr/bin/env bash
# Configures and builds ddpio (Release, warnings as errors) into build/release: everything, or
# only the named targets (--target NAME, repeatable: `--target ddpio_cli` is the program and its
# libraries, no tests).
# Usage: scripts/build.sh [--target NAME]... [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
configure=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target) [ $# -ge 2 ] || { echo "build.sh: --target needs a name" >&2; exit 2; }
              targets+=(--target "$2"); shift 2 ;;
    *) configure+=("$1"); shift ;;
  esac
done
# Only the program's packages when only the program is built (the newcomer's first run:
# scripts/demo.sh); every package otherwise.
deps=()
if [ "${targets[*]:-}" = "--target ddpio_cli" ]; then deps=(--program); fi
scripts/install-deps.sh "${deps[@]}"
cmake --preset release "${configure[@]}" >/dev/null
cmake --build --preset release -j "$(nproc)" "${targets[@]}"
