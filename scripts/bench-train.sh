#!/usr/bin/env bash
# Does the data path keep the trainer fed? `ddpio train` on 4 local ranks for group sizes 1 and
# 2, loader workers 1 and 2 per rank, and --compute-ms 0, 5 and 20 of simulated extra compute
# per step; each repeated. Per configuration: the job's samples/s (sum over ranks; they run in
# lock-step through the gradient all-reduce), the median rank's data-stall fraction (time waiting
# for the next batch / step time), and two ceilings: the data ceiling (`ddpio bench loader`,
# one process decoding on all cores, same run) and the compute ceiling (samples / time not
# waiting for data: what this model would reach with free data).
# Usage: scripts/bench-train.sh DATASET [repeats=2] [epochs=2]
set -euo pipefail
cd "$(dirname "$0")/.."
DDPIO=$PWD/build/release/tools/ddpio
DATA=${1:?usage: scripts/bench-train.sh DATASET [repeats] [epochs]}
REPEATS=${2:-2}
EPOCHS=${3:-2}
OUT=$(mktemp -d /tmp/ddpio-bench-train.XXXXXX)
$DDPIO bench loader --data "$DATA" --workers 0 --image-size 32 --batch-size 32 --epochs 2 --json 2>/dev/null \
  | tail -1 > "$OUT/ceiling.json"
for rep in $(seq "$REPEATS"); do
  for g in 1 2; do
    for w in 1 2; do
      for c in 0 5 20; do
        $DDPIO launch --nproc-per-node 4 -- "$DDPIO" train --data "$DATA" --epochs "$EPOCHS" --batch-size 32 \
            --image-size 32 --hidden 256,128 --group-size "$g" --workers "$w" --compute-ms "$c" \
            --progress-every 0 --json 2>/dev/null \
          | sed -n 's/^\[rank [0-9]*\] \({.*\)$/\1/p' > "$OUT/$g-$w-$c-$rep.jsonl"
      done
    done
  done
done
python3 - "$OUT" "$REPEATS" <<'PY'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
ceiling = json.load(open(out + "/ceiling.json"))["images_per_s"]
print(f"data ceiling: ddpio bench loader, one process, all cores, 32 px crops: {ceiling:.0f} samples/s")
print(f"{'G':>2} {'workers':>7} {'compute ms':>10} {'samples/s':>9} {'of data ceil':>12} {'compute ceil':>12} "
      f"{'stall':>6} {'stall min-max over ranks':>24}")
for g in (1, 2):
    for w in (1, 2):
        for c in (0, 5, 20):
            reps = []
            for rep in range(1, repeats + 1):
                rows = [json.loads(l) for l in open(f"{out}/{g}-{w}-{c}-{rep}.jsonl")]
                if len(rows) != 4:
                    sys.exit(f"G={g} workers={w} compute={c} repeat {rep}: {len(rows)} rank lines, wanted 4")
                reps.append(rows)
            sps = statistics.median(sum(r["samples_per_s"] for r in rows) for rows in reps)
            stall = statistics.median(statistics.median(r["stall_fraction"] for r in rows) for rows in reps)
            lo = min(r["stall_fraction"] for rows in reps for r in rows)
            hi = max(r["stall_fraction"] for rows in reps for r in rows)
            print(f"{g:>2} {w:>7} {c:>10} {sps:>9.0f} {sps / ceiling:>12.2f} {sps / (1 - stall):>12.0f} "
                  f"{100 * stall:>5.1f}% {f'{100 * lo:.1f}-{100 * hi:.1f}%':>24}")
PY
echo "raw per-rank lines: $OUT"
