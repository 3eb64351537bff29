#!/usr/bin/env bash
# Group feeding on 4 local ranks: images/s per rank, records read, bytes moved, for group sizes
# 1 (every rank reads for itself: the baseline), 2 and 4, in shard/encoded, shard/decoded and
# replicate/encoded, each repeated; figures are medians over repeats of the per-rank medians.
# Ceiling: the JPEG decode throughput of the whole machine, measured in the same run with
# `ddpio bench loader` (one loader, all cores): what 4 ranks sharing these cores can reach at most.
# Usage: scripts/bench-feed.sh DATASET [repeats=3] [epochs=1]
set -euo pipefail
cd "$(dirname "$0")/.."
DDPIO=$PWD/build/release/tools/ddpio
DATA=${1:?usage: scripts/bench-feed.sh DATASET [repeats] [epochs]}
REPEATS=${2:-3}
EPOCHS=${3:-1}
OUT=$(mktemp -d /tmp/ddpio-bench-feed.XXXXXX)
$DDPIO bench loader --data "$DATA" --workers 0 --epochs 2 --json 2>/dev/null | tail -1 > "$OUT/ceiling.json"
for rep in $(seq "$REPEATS"); do
  for cfg in "shard encoded" "shard decoded" "replicate encoded"; do
    set -- $cfg
    for g in 1 2 4; do
      $DDPIO launch --nproc-per-node 4 -- "$DDPIO" bench feed --data "$DATA" --group-size "$g" --mode "$1" \
          --payload "$2" --epochs "$EPOCHS" --workers 1 --json 2>/dev/null \
        | sed -n 's/^\[rank [0-9]*\] \({.*\)$/\1/p' > "$OUT/$1-$2-$g-$rep.jsonl"
    done
  done
done
python3 - "$OUT" "$REPEATS" <<'PY'
import glob, json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
ceiling = json.load(open(out + "/ceiling.json"))
print(f"ceiling: ddpio bench loader, one process on all cores, same run: {ceiling['images_per_s']:.0f} images/s "
      f"(its full-decode ceiling {ceiling['ceiling_images_per_s']:.0f}); 'job' = all ranks' images / the job's span")
print(f"{'mode':10} {'payload':8} {'G':>2} {'img/s/rank':>10} {'job':>6} {'of ceil':>7} {'reads/rank (leader, peer)':>26} "
      f"{'MB sent/leader':>14} {'MB recv/peer':>12} {'net wait s':>10}")
for mode, payload in (("shard", "encoded"), ("shard", "decoded"), ("replicate", "encoded")):
    for g in (1, 2, 4):
        per_rep = []
        for rep in range(1, repeats + 1):
            rows = [json.loads(l) for l in open(f"{out}/{mode}-{payload}-{g}-{rep}.jsonl")]
            if len(rows) != 4:
                sys.exit(f"{mode} {payload} G={g} repeat {rep}: {len(rows)} rank lines, wanted 4")
            per_rep.append(rows)
        ips = statistics.median(statistics.median(r["images_per_s"] for r in rows) for rows in per_rep)
        # The job's rate: every rank's images over the span from the first start to the last end
        # (summing per-rank rates would overstate it when ranks do not run exactly together).
        total = statistics.median(sum(r["images"] for r in rows) /
                                  (max(r["end_unix_s"] for r in rows) - min(r["start_unix_s"] for r in rows))
                                  for rows in per_rep)
        rows = per_rep[-1]
        leaders = [r for r in rows if r["leader"]]
        peers = [r for r in rows if not r["leader"]]
        reads = f"{leaders[0]['records_read']}, {peers[0]['records_read'] if peers else '-'}"
        sent = statistics.median(r["bytes_sent"] for r in leaders) / 1e6
        recv = statistics.median(r["bytes_received"] for r in peers) / 1e6 if peers else 0.0
        wait = statistics.median(r["network_wait_s"] for r in rows)
        print(f"{mode:10} {payload:8} {g:>2} {ips:>10.0f} {total:>6.0f} {total / ceiling['images_per_s']:>7.2f} "
              f"{reads:>26} {sent:>14.1f} {recv:>12.1f} {wait:>10.2f}")
PY
echo "raw per-rank lines: $OUT"
