#!/usr/bin/env bash
# Conversion speed next to its ceilings, measured in one run on the same files:
#   cp:      a plain recursive copy of the source bytes to the same filesystem;
#   convert: ddpio convert with full decode validation (default) and with --header-only.
# Usage: scripts/bench-convert.sh [images_per_class] [size]   (10 classes; defaults 500, 448)
set -euo pipefail
cd "$(dirname "$0")/.."
DDPIO=build/release/tools/ddpio
PER_CLASS=${1:-500}
SIZE=${2:-448}
WORK=${DDPIO_WORK:-/tmp/ddpio-bench-convert}
rm -rf "$WORK" && mkdir -p "$WORK"
$DDPIO synth --out "$WORK/src" --classes 10 --per-class "$PER_CLASS" --size "$SIZE" --quiet
N=$((10 * PER_CLASS))
BYTES=$(du -sb "$WORK/src" | cut -f1)
cat "$WORK"/src/*/* > /dev/null  # page cache warm for everyone
t0=$(date +%s.%N); cp -r "$WORK/src" "$WORK/copy"; sync -f "$WORK/copy"; t1=$(date +%s.%N)
$DDPIO convert --src "$WORK/src" --out "$WORK/full.lmdb" --quiet --json > "$WORK/full.json"
$DDPIO convert --src "$WORK/src" --out "$WORK/header.lmdb" --header-only --quiet --json > "$WORK/header.json"
python3 - "$N" "$BYTES" "$t0" "$t1" "$WORK" <<'PY'
import json, sys
n, size, t0, t1, work = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
cp = t1 - t0
full = json.load(open(work + "/full.json"))
head = json.load(open(work + "/header.json"))
print(f"{n} images, {size/1e6:.1f} MB, mean {size/n/1e3:.1f} KB")
print(f"cp -r (ceiling)        {n/cp:8.0f} images/s  {size/cp/1e6:7.1f} MB/s")
for name, r in (("convert (full decode)", full), ("convert --header-only", head)):
    s = r["seconds"]
    print(f"{name:22} {n/s:8.0f} images/s  {size/s/1e6:7.1f} MB/s  = {cp/s:.2f} x cp")
PY
