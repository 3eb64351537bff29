#!/usr/bin/env bash
# shellcheck disable=SC2015  # `A && B || fail` is intended
# The ranks of one node reading a dataset in an object store, with and without a shared cache
# folder. One run, the same dataset and gateway, configurations interleaved round by round:
#   local     the ranks read the local LMDB (the ceiling: no store at all)
#   none      no cache folder: each rank reads its share on its own (a dataset larger than the
#             reader's memory goes record by record in the exact order)
#   per-rank  a cache folder of its own for each rank (--cache-dir WORK/own/RANK): whole chunks,
#             but each rank fetches every chunk its records are in
#   shared    one cache folder for the node's ranks (--cache-dir WORK/shared): whole chunks, each
#             fetched once by whichever rank needs it first (its claim), the others reading it from
#             the folder
# Each run is `ddpio launch --nproc-per-node RANKS -- ddpio bench feed --data URL --epochs 1` in
# shard mode (each rank its own samples, the exact order), folders emptied before every run.
# Reported per configuration, median over rounds: the node's requests to the store (every rank's
# `store.requests` summed), records fetched (summed: the dataset once is its size), MB received,
# records read from the folder, and the slowest rank's images/s (the node waits for it), also as a
# ratio to the local row of the same round (median of the paired ratios).
#
# Usage: scripts/bench-node-cache.sh [--rounds N] [--db DB] [--ranks N] [--work DIR] [--keep]
#   --rounds N   rounds, each running every configuration once in rotated order (default 3; >= 1)
#   --db DB      the ddpio dataset to upload and read (default /tmp/rp300db: 4,500 ~91 KB photos,
#                419 MB, larger than a reader's default 256 MiB memory; see bench-object-store.sh)
#   --ranks N    ranks on the node (default 2; >= 2)
#   --work DIR   work folder (default: a new /tmp/ddpio-bench-node.XXXXXX, removed at the end)
#   --keep       keep the work folder (each run's JSON lines: WORK/runs/*.jsonl)
# Environment: DDPIO (default build/release/tools/ddpio). The store: AWS_ENDPOINT_URL and its
#   credentials when set (a bucket of its own is made and left, named in the output); else a
#   gateway of its own (scripts/object-store.sh up --dir WORK/s3 --size-mb 2048), stopped at the end.
# Output: progress on stderr, the table (Markdown) on stdout.
# Exit 0 success, 1 runtime error, 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
PROG=bench-node-cache

ROUNDS=3
DB=/tmp/rp300db
RANKS=2
WORK=""
KEEP=0
DDPIO=${DDPIO:-build/release/tools/ddpio}

log() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: $*" >&2; exit 1; }
usage_error() { echo "$PROG: $*; see '$0 --help'" >&2; exit 2; }
usage() { sed -n '3,/^set -/{/^#/s/^# \{0,1\}//p}' "$0"; }

while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --rounds|--db|--ranks|--work)
      [ $# -ge 2 ] || usage_error "$1 needs a value"
      case "$1" in
        --rounds) ROUNDS=$2 ;; --db) DB=$2 ;; --ranks) RANKS=$2 ;; --work) WORK=$2 ;;
      esac
      shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done
[[ "$ROUNDS" =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] || usage_error "--rounds must be a number >= 1"
[[ "$RANKS" =~ ^[0-9]+$ ]] && [ "$RANKS" -ge 2 ] || usage_error "--ranks must be a number >= 2"
[ -e "$DB" ] || usage_error "--db $DB does not exist (make one: see scripts/bench-object-store.sh --help)"
[ -x "$DDPIO" ] || die "DDPIO=$DDPIO is not an executable (build it, or set DDPIO=...)"
DDPIO=$(realpath "$DDPIO")

if [ -z "$WORK" ]; then WORK=$(mktemp -d /tmp/ddpio-bench-node.XXXXXX); else mkdir -p "$WORK"; fi
WORK=$(realpath "$WORK")
OWN_GATEWAY=0
cleanup() {
  if [ "$OWN_GATEWAY" = 1 ]; then scripts/object-store.sh down --dir "$WORK/s3" >/dev/null 2>&1 || true; fi
  if [ "$KEEP" = 0 ]; then rm -rf "$WORK"; else log "kept $WORK"; fi
}
trap cleanup EXIT
mkdir -p "$WORK/runs"

if [ -z "${AWS_ENDPOINT_URL:-}" ]; then
  log "starting a gateway of its own (scripts/object-store.sh up --dir $WORK/s3)"
  scripts/object-store.sh up --dir "$WORK/s3" --size-mb 2048 > "$WORK/s3env.sh" || die "the gateway did not start"
  OWN_GATEWAY=1
  # shellcheck disable=SC1091
  source "$WORK/s3env.sh"
fi
BUCKET="ddpio-node-$$"
URL="s3://$BUCKET/data"
log "uploading $DB to $URL"
"$DDPIO" upload "$DB" "$URL" --create-bucket --quiet || die "the upload failed"

# One run of configuration $1 in round $2: the ranks' JSON lines in WORK/runs/$1.$2.jsonl.
run() {
  local config=$1 round=$2 out="$WORK/runs/$1.$2.jsonl"
  rm -rf "$WORK/own" "$WORK/shared"
  local cmd=("$DDPIO" bench feed --data "$URL" --batch-size 32 --image-size 64 --workers 1
             --epochs 1 --json)
  case "$config" in
    local) cmd[4]=$DB ;;
    none) ;;
    shared) cmd+=(--cache-dir "$WORK/shared") ;;
    per-rank)
      # Each rank its own folder: the launcher gives every rank RANK in its environment.
      # shellcheck disable=SC2016  # expanded by that shell, in each rank
      cmd=(sh -c 'exec "$@" --cache-dir "$OWN/$RANK"' sh "${cmd[@]}") ;;
  esac
  OWN="$WORK/own" "$DDPIO" launch --nproc-per-node "$RANKS" -- "${cmd[@]}" 2>"$WORK/runs/$config.$round.err" |
    sed -n 's/^\[rank [0-9]*\] *//; /^{/p' > "$out" || die "run $config (round $round) failed: $WORK/runs/$config.$round.err"
  [ "$(wc -l < "$out")" -eq "$RANKS" ] || die "run $config (round $round): $(wc -l < "$out") JSON lines, not $RANKS"
}

export OWN
CONFIGS=(local none per-rank shared)
for round in $(seq 1 "$ROUNDS"); do
  for k in 0 1 2 3; do
    config=${CONFIGS[$(((k + round - 1) % 4))]}
    log "round $round/$ROUNDS: $config"
    run "$config" "$round"
  done
done

python3 - "$WORK/runs" "$ROUNDS" "$RANKS" "$URL" <<'EOF'
import json, os, statistics, sys
runs, rounds, ranks, url = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def totals(config, r):
    lines = [json.loads(l) for l in open(os.path.join(runs, f"{config}.{r}.jsonl"))]
    s = [l.get("store", {"requests": 0, "records_fetched": 0, "bytes": 0, "disk_hits": 0})
         for l in lines]
    return {"requests": sum(x["requests"] for x in s),
            "records": sum(x["records_fetched"] for x in s),
            "mb": sum(x["bytes"] for x in s) / 1e6,
            "disk": sum(x["disk_hits"] for x in s),
            "slowest": min(l["images_per_s"] for l in lines)}
print(f"{ranks} ranks on one node, {url}, median of {rounds} round(s) (range)\n")
print("| cache folder | requests (node) | records fetched (node) | MB received | records from the folder | slowest rank, images/s | / local |")
print("|---|---|---|---|---|---|---|")
local = [totals("local", r)["slowest"] for r in range(1, rounds + 1)]
for config in ("local", "none", "per-rank", "shared"):
    t = [totals(config, r) for r in range(1, rounds + 1)]
    def cell(key, fmt):
        v = [x[key] for x in t]
        return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))})"
    print(f"| {config} | {cell('requests', '{:,.0f}')} | {cell('records', '{:,.0f}')} | "
          f"{cell('mb', '{:,.1f}')} | {cell('disk', '{:,.0f}')} | {cell('slowest', '{:,.0f}')} | "
          f"{statistics.median(x['slowest'] / l for x, l in zip(t, local)):.2f} |")
EOF
