#!/usr/bin/env bash
# Group feeding on 4 local ranks: images/s per rank, records read, bytes moved, for group sizes
# 1 (every rank reads for itself: the baseline), 2 and 4, in shard/encoded, shard/decoded and
# replicate/encoded, each repeated; figures are medians over repeats of the per-rank medians.
# Ceiling: measured by the job itself, the way its figure is measured. Before each epoch and
# after the last every rank of `bench feed` decodes the same records with tjDecompress2 (full
# decode), all ranks at once (a barrier before and after each round), each with as many decoders
# as its loaders have workers (none on a member sent decoded batches): the sum of the ranks'
# ceilings is what this machine decodes with the job's threads — 4 processes sharing its cores.
# "of ceil" = the job's images/s over that sum, in the same run (median over repeats).
# Usage: scripts/bench-feed.sh DATASET [repeats=3] [epochs=1]
set -euo pipefail
cd "$(dirname "$0")/.."
DDPIO=${DDPIO:-$PWD/build/release/tools/ddpio}  # another build: DDPIO=path/to/ddpio
DATA=${1:?usage: scripts/bench-feed.sh DATASET [repeats] [epochs]}
REPEATS=${2:-3}
EPOCHS=${3:-1}
OUT=$(mktemp -d /tmp/ddpio-bench-feed.XXXXXX)
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
print("'job' = all ranks' images / the epochs' spans (each from the first rank's start to the last "
      "one's end; the ceiling rounds between epochs left out); 'ceil' = the sum of the ranks' "
      "concurrent full-decode ceilings, same run; 'of ceil' = job / ceil")
print(f"{'mode':10} {'payload':8} {'G':>2} {'img/s/rank':>10} {'job':>6} {'ceil':>6} {'of ceil':>7} "
      f"{'reads/rank (leader, peer)':>26} {'MB sent/leader':>14} {'MB recv/peer':>12} {'net wait s':>10}")


def job_rate(rows):
    """Every rank's images over the epochs' spans (summing per-rank rates would overstate it when
    ranks do not run exactly together)."""
    epochs = len(rows[0]["epoch_start_unix_s"])
    span = sum(max(r["epoch_end_unix_s"][e] for r in rows) - min(r["epoch_start_unix_s"][e] for r in rows)
               for e in range(epochs))
    return sum(r["images"] for r in rows) / span


for mode, payload in (("shard", "encoded"), ("shard", "decoded"), ("replicate", "encoded")):
    for g in (1, 2, 4):
        per_rep = []
        for rep in range(1, repeats + 1):
            rows = [json.loads(l) for l in open(f"{out}/{mode}-{payload}-{g}-{rep}.jsonl")]
            if len(rows) != 4:
                sys.exit(f"{mode} {payload} G={g} repeat {rep}: {len(rows)} rank lines, wanted 4")
            per_rep.append(rows)
        ips = statistics.median(statistics.median(r["images_per_s"] for r in rows) for rows in per_rep)
        total = statistics.median(job_rate(rows) for rows in per_rep)
        # All the job's decoders at once: the sum of the ranks' ceilings (0 for a member that
        # decodes nothing), each repeat's job against its own.
        ceil = statistics.median(sum(r["ceiling_images_per_s"] for r in rows) for rows in per_rep)
        of_ceil = statistics.median(job_rate(rows) / sum(r["ceiling_images_per_s"] for r in rows)
                                    for rows in per_rep)
        rows = per_rep[-1]
        leaders = [r for r in rows if r["leader"]]
        peers = [r for r in rows if not r["leader"]]
        reads = f"{leaders[0]['records_read']}, {peers[0]['records_read'] if peers else '-'}"
        sent = statistics.median(r["bytes_sent"] for r in leaders) / 1e6
        recv = statistics.median(r["bytes_received"] for r in peers) / 1e6 if peers else 0.0
        wait = statistics.median(r["network_wait_s"] for r in rows)
        print(f"{mode:10} {payload:8} {g:>2} {ips:>10.0f} {total:>6.0f} {ceil:>6.0f} {of_ceil:>7.2f} "
              f"{reads:>26} {sent:>14.1f} {recv:>12.1f} {wait:>10.2f}")
PY
echo "raw per-rank lines: $OUT"
