#!/usr/bin/env bash
# Conversion speed next to its ceiling, measured in one run on the same files, in rounds:
#   concat:  every source file read and its bytes appended to one file, fsync'ed (the ceiling for
#            "these bytes into one durable file", which is what a conversion writes);
#   cp -r:   a plain recursive copy (file creation per image: a reference, not a ceiling);
#   convert: ddpio convert as by default (full decode validation, every JPEG re-written with
#            restart markers and checked pixel for pixel), with --restart-interval 0 (original
#            bytes kept) and with --header-only, into one dataset and into --shards 2.
# Each round runs every variant once, in a rotated order; the table shows medians.
# Usage: scripts/bench-convert.sh [images_per_class] [size] [rounds]   (10 classes; defaults 500, 448, 3)
#        DDPIO_SRC=/tmp/photos scripts/bench-convert.sh   # an existing ImageFolder instead of synth
set -euo pipefail
cd "$(dirname "$0")/.."
DDPIO=build/release/tools/ddpio
PER_CLASS=${1:-500}
SIZE=${2:-448}
ROUNDS=${3:-3}
WORK=${DDPIO_WORK:-/tmp/ddpio-bench-convert}
rm -rf "$WORK" && mkdir -p "$WORK"
SRC=${DDPIO_SRC:-$WORK/src}
if [ -z "${DDPIO_SRC:-}" ]; then
  $DDPIO synth --out "$SRC" --classes 10 --per-class "$PER_CLASS" --size "$SIZE" --quiet
fi
python3 - "$DDPIO" "$SRC" "$WORK" "$ROUNDS" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time
ddpio, src, work, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
files = [os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs]
n, size = len(files), sum(os.path.getsize(f) for f in files)
for f in files:  # page cache warm for everyone
    open(f, "rb").read()
variants = {
    "concat into one file + fsync (ceiling)": "concat",
    "cp -r + sync (reference)": None,
    "ddpio convert (default: full decode + restart markers)": [],
    "ddpio convert --restart-interval 0 (full decode, original bytes)": ["--restart-interval", "0"],
    "ddpio convert --shards 2": ["--shards", "2"],
    "ddpio convert --restart-interval 0 --shards 2": ["--restart-interval", "0", "--shards", "2"],
    "ddpio convert --header-only (restart markers still checked)": ["--header-only"],
    "ddpio convert --header-only --restart-interval 0": ["--header-only", "--restart-interval", "0"],
}
times = {k: [] for k in variants}
names = list(variants)
for r in range(rounds):
    for name in names[r % len(names):] + names[:r % len(names)]:
        out = os.path.join(work, "out")
        shutil.rmtree(out, ignore_errors=True)
        if os.path.isfile(out):
            os.remove(out)
        t0 = time.monotonic()
        if variants[name] == "concat":
            with open(out, "wb") as w:
                for f in files:
                    with open(f, "rb") as r:
                        w.write(r.read())
                w.flush()
                os.fsync(w.fileno())
        elif variants[name] is None:
            subprocess.run(["cp", "-r", src, out], check=True)
            subprocess.run(["sync", "-f", out], check=True)
        else:
            subprocess.run([ddpio, "convert", "--src", src, "--out", out, "--quiet", *variants[name]],
                           check=True, capture_output=True)
        times[name].append(time.monotonic() - t0)
cp = statistics.median(times[names[0]])
print(f"{n} images, {size / 1e6:.1f} MB, mean {size / n / 1e3:.1f} KB; {os.cpu_count()} cores; median of {rounds} rounds\n")
print("| | images/s | MB/s | vs the ceiling |")
print("|---|---|---|---|")
for name in names:
    t = statistics.median(times[name])
    print(f"| {name} | {n / t:,.0f} | {size / t / 1e6:,.0f} | {cp / t:.2f} |")
out = os.path.join(work, "out")
for name, flags in (("restart markers", []), ("original bytes", ["--restart-interval", "0"])):
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([ddpio, "convert", "--src", src, "--out", out, "--quiet", *flags], check=True, capture_output=True)
    j = json.loads(subprocess.run([ddpio, "inspect", out, "--json"], check=True, capture_output=True,
                                  text=True).stdout.strip().splitlines()[-1])
    print(f"\n{name}: {j['payload_bytes'] / 1e6:.2f} MB of payload ({j['payload_bytes'] / size - 1:+.2%} vs the sources)")
PY
