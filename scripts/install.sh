#!/usr/bin/env bash
# Builds ddpio (scripts/build.sh: Debian packages, Release) and installs it into a prefix
# (default /usr/local): the library, headers, CMake package, bin/ddpio and the Python package for
# Debian's /usr/bin/python3 (<prefix>/lib/python3.X/dist-packages, on its path for /usr/local).
# Uses sudo when not root. Usage: scripts/install.sh [PREFIX]
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${1:-/usr/local}
scripts/build.sh
SUDO=()
if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
"${SUDO[@]}" cmake --install build/release --prefix "$PREFIX" | grep -c '^-- ' | sed "s|^|installed into $PREFIX: files: |"
/usr/bin/python3 -c "import ddpio; print('ddpio', ddpio.__version__, 'for', __import__('sys').executable, 'at', ddpio.__file__)"
