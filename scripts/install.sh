#!/usr/bin/env bash
# Installs ddpio into a prefix (default /usr/local): the libraries, headers and CMake package
# (find_package(ddpio)), bin/ddpio and the Python package for Debian's /usr/bin/python3
# (<prefix>/lib/python3.X/dist-packages, on its path for /usr/local).
# Builds only those — the library, the program (ddpio_cli) and the extension module
# (ddpio_python) — in a Release build of its own with the tests off (build/install), not the
# tests and stand-ins of scripts/build.sh and scripts/test.sh. Debian packages first
# (scripts/install-deps.sh); sudo for the install step when not root.
# Usage: scripts/install.sh [PREFIX]
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${1:-/usr/local}
BUILD=build/install
scripts/install-deps.sh
# DDPIO_WITH_PYTHON=ON: a missing pybind11 or Python header is an error here, not a silently
# skipped Python package. No -Werror (unlike the presets): a warning must not stop an install.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPIO_BUILD_TESTS=OFF -DBUILD_TESTING=OFF \
      -DDDPIO_WITH_PYTHON=ON >/dev/null
# ddpio_cli links every library module, so these two targets are everything `cmake --install`
# installs.
cmake --build "$BUILD" -j "$(nproc)" --target ddpio_cli ddpio_python
SUDO=()
if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
"${SUDO[@]}" cmake --install "$BUILD" --prefix "$PREFIX" | grep -c '^-- ' | sed "s|^|installed into $PREFIX: files: |"

# The installed package, imported by the Python it was built for (from /, so nothing of the
# checkout is on its path). A prefix whose package directory is not on that Python's path
# (anything but /usr/local and /usr) needs PYTHONPATH: said, and used for the check.
PYDIR=$PREFIX/$(sed -n 's/^DDPIO_PYTHON_INSTALL_DIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
PYTHON=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
check=(env)
if ! "$PYTHON" -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "$PYDIR"; then
  echo "$PYDIR is not on $PYTHON's path: use PYTHONPATH=$PYDIR"
  check=(env "PYTHONPATH=$PYDIR${PYTHONPATH:+:$PYTHONPATH}")
fi
(cd / && "${check[@]}" "$PYTHON" -c "import ddpio; print('ddpio', ddpio.__version__, 'for', __import__('sys').executable, 'at', ddpio.__file__)")
