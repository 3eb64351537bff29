#!/usr/bin/env bash
# How the trainer's linear-algebra library was chosen: OpenBLAS vs Eigen on the MLP's product
# shapes, built the way ddpio is built (-O3, no -march: binaries must run on any x86-64), with
# OpenBLAS's large-square rate as the ceiling. Installs libeigen3-dev if missing (not a ddpio
# dependency; only this comparison uses it). Usage: scripts/bench-gemm.sh [threads=1]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! dpkg -s libeigen3-dev >/dev/null 2>&1 || ! dpkg -s libopenblas-dev >/dev/null 2>&1; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get install -y -q libeigen3-dev libopenblas-dev >/dev/null
fi
OUT=$(mktemp -d /tmp/ddpio-bench-gemm.XXXXXX)
g++ -std=c++20 -O3 -DNDEBUG -o "$OUT/bench-gemm" scripts/bench-gemm.cc -I/usr/include/eigen3 \
  $(pkg-config --cflags --libs openblas)
"$OUT/bench-gemm" "${1:-1}"
