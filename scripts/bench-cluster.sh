#!/usr/bin/env bash
# The cluster sweep from a fresh checkout, in one command (root): builds ddpio, synthesises a
# dataset of ~85 KB photos, runs `scripts/sim-cluster.sh sweep` on 4 simulated nodes x 2 ranks,
# and leaves only the report (sweep.md, results.jsonl, plots/*.svg) in OUT. The dataset and the
# cluster (namespaces, loop devices, mounts, cgroups, qdiscs) are removed even on failure.
# Usage: sudo scripts/bench-cluster.sh [--quick] [--out DIR] [more sweep flags, e.g. --sections grid]
#   --quick: ~10 minutes (fewer storage rates, one link rate, single rounds); the full sweep ~1 hour.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="reports/cluster-$(date +%Y%m%d-%H%M)"
PER_CLASS=200
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --per-class) PER_CLASS="$2"; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-cluster: needs root (network namespaces, loop devices, cgroups); run it with sudo" >&2
  exit 2
fi
scripts/build.sh >/dev/null
DDPIO=build/release/tools/ddpio
WORK=$(mktemp -d /var/tmp/ddpio-bench-cluster.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
$DDPIO synth --out "$WORK/src" --classes 10 --per-class "$PER_CLASS" --size 448 --quiet
$DDPIO convert --src "$WORK/src" --out "$WORK/data.lmdb" --quiet
rm -rf "$WORK/src"
scripts/sim-cluster.sh sweep --data "$WORK/data.lmdb" --out "$OUT" --ddpio "$DDPIO" "${ARGS[@]}"
echo "bench-cluster: report in $OUT/sweep.md"
