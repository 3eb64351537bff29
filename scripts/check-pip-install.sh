#!/usr/bin/env bash
# Checks `pip install .` as docs/PYTHON.md ("Install") tells it, offline: a venv of Debian's
# Python that sees Debian's packages (torch), `pip install --no-build-isolation --no-index` of this
# checkout (setup.py: a CMake build in a temporary folder), then, from outside the checkout and
# with nothing of a build or /usr/local on the paths: `import ddpio, torch`; `python -m ddpio info`
# runs the program shipped inside the package; a tiny dataset goes synth -> convert ->
# ddpio.Loader and every image comes back; pip left no build folder or egg-info in the checkout.
# Everything lives in one temporary folder, removed at the end (also on failure or Ctrl-C).
# Takes as long as a build of the library, the program and the module (minutes).
# Usage: scripts/check-pip-install.sh   (PYTHON=... for another interpreter; default /usr/bin/python3)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
PYTHON=${PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ddpio-pip-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "check-pip-install: FAILED: $*" >&2; exit 1; }

# What setuptools writes into a project by default; none of it may appear.
litter() { (shopt -s nullglob; echo build/lib* build/bdist.* build/temp.* ./*.egg-info python/*.egg-info); }
litter_before=$(litter)

"$PYTHON" -m venv --system-site-packages "$WORK/venv"
PY=$WORK/venv/bin/python
start=$(date +%s)
if ! "$PY" -m pip install -v --no-build-isolation --no-index --root-user-action=ignore "$SRC" \
     >"$WORK/pip.log" 2>&1; then
  tail -n 60 "$WORK/pip.log" >&2
  fail "pip install (the last 60 lines of its output are above)"
fi
echo "pip install: $(($(date +%s) - start)) s; $(grep '^Successfully installed' "$WORK/pip.log")"
# pip's own warnings and hints (a --user install, scripts not on PATH, deprecations): none.
if grep -E '^(WARNING|DEPRECATION):' "$WORK/pip.log" >&2; then fail "pip printed the warnings above"; fi
[[ -z $(comm -13 <(tr ' ' '\n' <<<"$litter_before" | sort) <(litter | tr ' ' '\n' | sort)) ]] ||
  fail "pip install left build files in the checkout: $(litter)"

# From an empty folder, so neither python/ddpio nor the C++ ddpio/ of the checkout is importable;
# no DDPIO_PROGRAM, PYTHONPATH or /usr/local/bin: the package must find its own program.
cd "$WORK"
in_venv() { env -u DDPIO_PROGRAM -u PYTHONPATH PATH=/usr/bin:/bin "$@"; }
in_venv "$PY" -c "import ddpio, torch; print('ddpio', ddpio.__version__, 'torch', torch.__version__, ddpio.__file__)"
site=$("$PY" -c "import sysconfig; print(sysconfig.get_path('platlib'))")
program=$(in_venv "$PY" -c "from ddpio.__main__ import find_program; print(find_program())")
[[ $program == "$site/ddpio/bin/ddpio" ]] || fail "python -m ddpio would run $program, not $site/ddpio/bin/ddpio"
in_venv "$PY" -m ddpio info
in_venv "$PY" -m ddpio synth --out "$WORK/s" --classes 2 --per-class 5 --size 32 --quiet
in_venv "$PY" -m ddpio convert --src "$WORK/s" --out "$WORK/s.lmdb" --quiet
in_venv "$PY" -c "
import sys, ddpio
batches = list(ddpio.Loader(sys.argv[1], batch_size=4, image_size=32))
images = sum(int(b['valid'].sum()) for b in batches)
print('Loader:', len(batches), 'batches,', images, 'images')
sys.exit(0 if (len(batches), images) == (3, 10) else 1)" "$WORK/s.lmdb" || fail "the Loader did not give 10 images in 3 batches"
echo "check-pip-install: OK"
