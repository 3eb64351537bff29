#!/usr/bin/env bash
# shellcheck disable=SC2015  # `A && B || fail` is intended
# The loader on a dataset in an S3-compatible object store, next to the local reader and
# to what a user would try first. One run, the same photos, the same workers, interleaved rounds:
#   local    ddpio bench loader --data DB                  (the local LMDB reader: the ceiling, since
#                                                           the link to the store is loopback)
#   remote   ddpio bench loader --data s3://BUCKET/rp      (the dataset fits the reader's memory:
#                                                           whole chunks of records, one GET each)
#   per-record  the same with --no-whole-chunks            (range GETs of the records asked for,
#                                                           neighbours coalesced, prefetched)
#   block    the same with --order block --block-window 4 and a memory budget of a third of the
#            dataset (DDPIO_S3_MEMORY_MB): a dataset larger than the cache, read a whole chunk per
#            GET in the block order, the cache holding the chunks in use
#   exact-bounded  the exact order with that budget: only the records asked for (what the exact
#            order can do when the dataset does not fit)
#   cached   the same with DDPIO_S3_CACHE_DIR: one process fills the empty cache folder (its epoch
#            is reported as "cache-fill"), then a second process reads it ("cached")
#   block-lmdb  the block row on the dataset uploaded as its LMDB file (--chunk-mb 0) instead of
#            chunk objects (the default layout): what the layout alone changes
#   s3fs     ddpio bench loader --data MOUNT/rp-lmdb       (the LMDB file uploaded as it is, through
#                                                           an s3fs read-only mount of the bucket)
#   boto3    a torch Dataset doing one boto3 GET per sample of the photos stored one object each,
#            PIL decode, RandomResizedCrop + flip, DataLoader(num_workers=WORKERS, batch_size=64)
#            (scripts/bench_boto3_loader.py)
#   bulk     the store's bulk rate: `ddpio bench storage --data s3://BUCKET/rp`'s "bulk" line, every
#            record in GETs of the block order's chunks (128 records), as many in flight, nothing
#            checked or decoded. The ceiling of a reader whose store shares the cores that decode is
#            the local reader and the bulk fetch as two loads on the same cores, per round
#            1 / (1/local + 1/bulk): the summary gives every row's ratio to it
# Every ddpio run is a fresh process running one epoch and nothing before it (--epochs 1
# --warmup-epochs 0: the first epoch is what is measured, and its first batch's wait is reported):
# a remote reader holds up to 256 MiB of records in memory, so later epochs of the same process
# would not ask the store again (measured once at the end: "remote, 3 epochs in one process").
# Before each s3fs run the page cache is dropped (the mount's pages would otherwise be read from
# memory). The ceiling lines of a remote run read their records through a reader of their own. The loader's own ceiling lines
# read the first --sample-images records before the epoch: kept at 16 so that they do not warm the
# remote reader. Requests: the gateway's own counters (radosgw `perf dump`: req, get, get_b) read
# before and after each run, when its admin socket is at hand; plus `ddpio inspect URL --verify
# --json`'s "store" object (one full pass over the records, as the program counts them).
#
# Usage: scripts/bench-object-store.sh [--rounds N] [--images DIR] [--db DB] [--workers N]
#                                      [--s3-dir DIR] [--work DIR] [--keep] [--skip VARIANT]...
#                                      [--first-byte-ms MS]
#   --rounds N     rounds, each running every variant once in rotated order (default 5; >= 3)
#   --images DIR   the ImageFolder of photos (default /tmp/rp300: 4,500 ~90 KB real photos, ~400 MB,
#                  scripts/real-photos.py --out /tmp/rp300 --count 4500 --long-side 600,800 --quality 95;
#                  the block row needs a dataset of 3x the ~120 MB its window keeps in use)
#   --db DB        a ddpio dataset converted from DIR (default: convert DIR into the work folder
#                  with this DDPIO, so format and options are this build's defaults)
#   --workers N    loader threads / DataLoader workers (default 2)
#   --s3-dir DIR   with AWS_ENDPOINT_URL already set: the state folder of scripts/object-store.sh,
#                  for the gateway's request counters (default $DDPIO_S3_DIR or /tmp/ddpio-s3)
#   --work DIR     work folder (default: a new /tmp/ddpio-bench-os.XXXXXX, removed at the end)
#   --keep         keep the work folder (run files: WORK/runs/*.json, WORK/results.jsonl)
#   --skip V       leave out a variant: remote, per-record, block, block-lmdb, exact-bounded, cached,
#                  s3fs, boto3, bulk
#   --first-byte-ms MS  every reader reaches the store through scripts/sim/delay_proxy.py, which holds
#                  each response's first byte MS ms after its request (a real object store's 10-200
#                  ms; default 0: no proxy). s3fs and boto3 go through it too
#                  (local is always run: the ratios are to it)
# Environment: DDPIO (default build/release/tools/ddpio), PYTHON (default: the first of python3,
#   /usr/bin/python3 that imports torch, torchvision, PIL and boto3). With AWS_ENDPOINT_URL unset,
#   starts its own gateway (scripts/object-store.sh up --dir /tmp/ddpio-bos-PID --size-mb 2048) and
#   stops it at the end; with it set, uses that store (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
#   AWS_REGION) and deletes its bucket at the end. Needs s3fs (apt-get install s3fs) and
#   python3-boto3 for their rows.
# Output: progress on stderr, the table (Markdown) on stdout, WORK/summary.json.
# Exit 0 success, 1 runtime error, 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
PROG=bench-object-store

ROUNDS=5
IMAGES=/tmp/rp300
DB=""
WORKERS=2
S3DIR=${DDPIO_S3_DIR:-/tmp/ddpio-s3}
WORK=""
KEEP=0
SKIP=" "
DDPIO=${DDPIO:-build/release/tools/ddpio}
SAMPLE_IMAGES=16
FIRST_BYTE_MS=0
BATCH=64
SIZE=224

log() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: $*" >&2; exit 1; }
usage_error() { echo "$PROG: $*; see '$0 --help'" >&2; exit 2; }
usage() { sed -n '3,/^set -/{/^#/s/^# \{0,1\}//p}' "$0"; }

while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --rounds|--images|--db|--workers|--s3-dir|--work|--skip|--first-byte-ms)
      [ $# -ge 2 ] || usage_error "$1 needs a value"
      case "$1" in
        --rounds) ROUNDS=$2 ;; --images) IMAGES=$2 ;; --db) DB=$2 ;; --workers) WORKERS=$2 ;;
        --s3-dir) S3DIR=$2 ;; --work) WORK=$2 ;; --first-byte-ms) FIRST_BYTE_MS=$2 ;;
        --skip)
          case "$2" in remote|per-record|block|block-lmdb|exact-bounded|cached|s3fs|boto3|bulk) SKIP="$SKIP$2 " ;;
            *) usage_error "--skip takes remote, per-record, block, block-lmdb, exact-bounded, cached, s3fs, boto3 or bulk, not '$2'" ;; esac ;;
      esac
      shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done
[[ "$ROUNDS" =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 3 ] || usage_error "--rounds must be a number >= 3"
[[ "$WORKERS" =~ ^[0-9]+$ ]] && [ "$WORKERS" -ge 1 ] || usage_error "--workers must be a number >= 1"
[[ "$FIRST_BYTE_MS" =~ ^[0-9]+$ ]] && [ "$FIRST_BYTE_MS" -le 10000 ] ||
  usage_error "--first-byte-ms must be a number of milliseconds, 0-10000"
[ -d "$IMAGES" ] || usage_error "--images $IMAGES is not a folder"
[ -z "$DB" ] || [ -e "$DB" ] || usage_error "--db $DB does not exist"
skipped() { [[ "$SKIP" == *" $1 "* ]]; }

# ---- tools ---------------------------------------------------------------------------------------
[ -x "$DDPIO" ] || die "DDPIO=$DDPIO is not an executable (build it, or set DDPIO=...)"
DDPIO=$(realpath "$DDPIO")
"$DDPIO" --help 2>/dev/null | grep -qE '^ +upload ' ||
  die "$DDPIO has no 'upload' command (a build without the object store?)"
if [ -z "${PYTHON:-}" ]; then
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import torch, torchvision, PIL, boto3' 2>/dev/null; then PYTHON=$p; break; fi
  done
fi
if ! skipped boto3; then
  [ -n "${PYTHON:-}" ] || die "no python3 with torch, torchvision, PIL and boto3 (apt-get install python3-boto3; or --skip boto3)"
fi
PYTHON=${PYTHON:-python3}
if ! skipped s3fs; then
  command -v s3fs >/dev/null || die "s3fs is not installed (apt-get install -y s3fs; or --skip s3fs)"
fi

# ---- work folder, cleanup ------------------------------------------------------------------------
if [ -z "$WORK" ]; then WORK=$(mktemp -d /tmp/ddpio-bench-os.XXXXXX); else mkdir -p "$WORK"; fi
WORK=$(realpath "$WORK")
mkdir -p "$WORK/runs"
MNT=$WORK/mnt
STARTED_GATEWAY=0
OWN_DIR=/tmp/ddpio-bos-$$
BUCKET=ddpio-bench-os-$$
PREFIX=rp
URL=s3://$BUCKET/$PREFIX
LMDB_PREFIX=rp-lmdb  # the same dataset as its LMDB file (--chunk-mb 0): for s3fs and block-lmdb
URL_LMDB=s3://$BUCKET/$LMDB_PREFIX
BUCKET_MADE=0
PROXY_PID=""
cleanup() {
  local rc=$?
  set +e
  [ -z "$PROXY_PID" ] || kill "$PROXY_PID" 2>/dev/null
  if mountpoint -q "$MNT" 2>/dev/null; then
    fusermount -u "$MNT" 2>/dev/null || umount "$MNT" 2>/dev/null || umount -l "$MNT"
  fi
  if [ "$STARTED_GATEWAY" = 1 ]; then
    scripts/object-store.sh down --dir "$OWN_DIR" >/dev/null 2>&1 || log "could not stop the gateway in $OWN_DIR"
  elif [ "$BUCKET_MADE" = 1 ]; then
    "$PYTHON" scripts/bench_boto3_loader.py delete --bucket "$BUCKET" || log "could not delete bucket $BUCKET"
  fi
  if [ "$KEEP" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the store -----------------------------------------------------------------------------------
if [ -z "${AWS_ENDPOINT_URL:-}" ]; then
  log "AWS_ENDPOINT_URL unset: starting a gateway in $OWN_DIR"
  STARTED_GATEWAY=1
  exports=$(scripts/object-store.sh up --dir "$OWN_DIR" --size-mb 2048) || die "could not start the gateway"
  eval "$exports"
  S3DIR=$OWN_DIR
fi
export AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION="${AWS_REGION:-us-east-1}"
ASOK=$S3DIR/run/client.rgw.ddpio.asok
# Behind the delay proxy: every reader's requests (the uploads too) go through it.
if [ "$FIRST_BYTE_MS" -gt 0 ]; then
  upstream=${AWS_ENDPOINT_URL#http://}
  upstream=${upstream%%/*}
  [[ "$upstream" == *:* ]] || die "AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL: --first-byte-ms needs http://HOST:PORT"
  python3 scripts/sim/delay_proxy.py --listen 127.0.0.1:0 --upstream "$upstream" \
    --delay-ms "$FIRST_BYTE_MS" >"$WORK/proxy.out" 2>"$WORK/proxy.err" &
  PROXY_PID=$!
  for _ in $(seq 100); do grep -q '^listening' "$WORK/proxy.out" 2>/dev/null && break; sleep 0.1; done
  listening=$(sed -n 's/^listening //p' "$WORK/proxy.out")
  [ -n "$listening" ] || die "the delay proxy did not start: $(cat "$WORK/proxy.err")"
  export AWS_ENDPOINT_URL=http://$listening
  log "every request goes through the delay proxy at $AWS_ENDPOINT_URL: first byte $FIRST_BYTE_MS ms after the request"
fi
if [ ! -S "$ASOK" ] || ! command -v ceph >/dev/null; then
  log "no gateway admin socket at $ASOK: requests per run are not counted on the server side"
  ASOK=""
fi
# CPU seconds the store's own processes (radosgw and ceph-osd of this machine) have used so far,
# summed (empty when none runs here: a remote store).
store_cpu() {
  local pids
  pids=$(pgrep -d' ' -x 'radosgw|ceph-osd') || return 0
  # shellcheck disable=SC2086
  python3 - $pids <<'PY' 2>/dev/null || true
import os, sys
tick = os.sysconf("SC_CLK_TCK")
total = 0
for pid in sys.argv[1:]:
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    except OSError:
        pass
print(f"{total / tick:.2f}")
PY
}
# "req get get_bytes" of the gateway so far (empty without an admin socket).
gateway_counts() {
  [ -n "$ASOK" ] || return 0
  ceph --admin-daemon "$ASOK" perf dump 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["rgw"]; print(r["req"], r["get"], r["get_b"])' || true
}

# ---- data: the dataset, uploaded; the photos, one object each --------------------------------------
if [ -z "$DB" ]; then
  DB=$WORK/db
  log "converting $IMAGES into $DB"
  "$DDPIO" convert --src "$IMAGES" --out "$DB" --quiet
fi
DB=$(realpath "$DB")
log "uploading $DB to $URL"
BUCKET_MADE=1
"$DDPIO" upload "$DB" "$URL" --create-bucket --json | tail -1 >"$WORK/upload.json"
if ! skipped s3fs || ! skipped block-lmdb; then
  log "uploading $DB as its LMDB file to $URL_LMDB"
  "$DDPIO" upload "$DB" "$URL_LMDB" --chunk-mb 0 --quiet
fi
if ! skipped boto3; then
  log "uploading the photos of $IMAGES one object each to s3://$BUCKET/photos/"
  "$PYTHON" scripts/bench_boto3_loader.py upload --images "$IMAGES" --bucket "$BUCKET" --prefix photos \
    --list "$WORK/photos.json" >"$WORK/photos-upload.json"
fi
if ! skipped s3fs; then
  mkdir -p "$MNT"
  printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$WORK/s3fs.passwd"
  chmod 600 "$WORK/s3fs.passwd"
  s3fs "$BUCKET" "$MNT" -o "ro,url=$AWS_ENDPOINT_URL,use_path_request_style,passwd_file=$WORK/s3fs.passwd"
  for _ in $(seq 50); do mountpoint -q "$MNT" && [ -e "$MNT/$LMDB_PREFIX/data.mdb" ] && break; sleep 0.2; done
  [ -e "$MNT/$LMDB_PREFIX/data.mdb" ] || die "s3fs mounted nothing usable at $MNT (no $LMDB_PREFIX/data.mdb)"
fi
cat "$DB/data.mdb" >/dev/null 2>&1 || cat "$DB" >/dev/null  # the local reader reads a warm page cache

# ---- one measurement -----------------------------------------------------------------------------
LOADER_FLAGS=(--workers "$WORKERS" --batch-size "$BATCH" --image-size "$SIZE" --warmup-epochs 0
              --sample-images "$SAMPLE_IMAGES" --json --epochs)   # + the number of epochs
# run VARIANT ROUND [ENV=VALUE...] -- COMMAND...: runs it, appends one line to results.jsonl.
run() {
  local variant=$1 round=$2 envs=() before after load out cpu_before cpu_after
  shift 2
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  out=$WORK/runs/$variant-$round
  load=$(cut -d' ' -f1 /proc/loadavg)
  before=$(gateway_counts)
  cpu_before=$(store_cpu)
  if ! /usr/bin/time -f '%U %S' -o "$out.time" env "${envs[@]}" "$@" >"$out.out" 2>"$out.err"; then
    tail -5 "$out.err" >&2
    die "$variant (round $round) failed: $*"
  fi
  after=$(gateway_counts)
  cpu_after=$(store_cpu)
  tail -1 "$out.out" >"$out.json"
  python3 - "$variant" "$round" "$load" "$before" "$after" "$out.json" "$out.time" "$cpu_before" "$cpu_after" \
    >>"$WORK/results.jsonl" <<'PY'
import json, sys
variant, rnd, load, before, after, path, time_path, cpu_before, cpu_after = sys.argv[1:]
j = json.load(open(path))
bulk = "bulk_records_per_s" in j  # bench storage: the bulk line is the row; its other passes are not
row = {"variant": variant, "round": int(rnd), "images_per_s": j["bulk_records_per_s"] if bulk else j["images_per_s"],
       "load1_before": float(load), "time_to_first_batch_s": j.get("time_to_first_batch_s"),
       "records": j.get("records", j.get("images"))}
note = ""
if bulk:
    row["bulk_mb_per_s"] = j["bulk_mb_per_s"]
    row["client_cpu_s"] = j["bulk_cpu_ms_per_record"] * j["records"] / 1e3
    before = after = cpu_before = cpu_after = ""  # the command's other passes would count too
if before and after:
    b, a = [int(x) for x in before.split()], [int(x) for x in after.split()]
    row["gateway"] = {"requests": a[0] - b[0], "gets": a[1] - b[1], "get_bytes": a[2] - b[2]}
    note = f"  {a[0] - b[0]:6d} requests {(a[2] - b[2]) / 1e6:7.1f} MB"
if isinstance(j.get("store"), dict) and not bulk:
    row["store"] = j["store"]
# The client's CPU (user + system of the command and the children it waited for: the benchmark's
# own ceiling lines and warm-up included, the same for every row), and the store's processes'.
user, system = (float(x) for x in open(time_path).read().split()[-2:])
row.setdefault("client_cpu_s", user + system)
if cpu_before and cpu_after:
    row["store_cpu_s"] = float(cpu_after) - float(cpu_before)
print(json.dumps(row))
print(f"bench-object-store: round {rnd} {variant:10s} {row['images_per_s']:7.0f} images/s{note}  (load {load})",
      file=sys.stderr)
PY
}

variant() {  # variant NAME ROUND
  case "$1" in
    local) run local "$2" -- "$DDPIO" bench loader --data "$DB" "${LOADER_FLAGS[@]}" 1 ;;
    remote) run remote "$2" -- "$DDPIO" bench loader --data "$URL" "${LOADER_FLAGS[@]}" 1 ;;
    per-record) run per-record "$2" -- "$DDPIO" bench loader --data "$URL" --no-whole-chunks "${LOADER_FLAGS[@]}" 1 ;;
    block) run block "$2" DDPIO_S3_MEMORY_MB="$BOUNDED_MB" -- "$DDPIO" bench loader --data "$URL" --order block \
             --block-window 4 "${LOADER_FLAGS[@]}" 1 ;;
    block-lmdb) run block-lmdb "$2" DDPIO_S3_MEMORY_MB="$BOUNDED_MB" -- "$DDPIO" bench loader --data "$URL_LMDB" \
             --order block --block-window 4 "${LOADER_FLAGS[@]}" 1 ;;
    exact-bounded) run exact-bounded "$2" DDPIO_S3_MEMORY_MB="$BOUNDED_MB" -- "$DDPIO" bench loader --data "$URL" \
             "${LOADER_FLAGS[@]}" 1 ;;
    cached)
      rm -rf "$WORK/cache"; mkdir -p "$WORK/cache"
      run cache-fill "$2" DDPIO_S3_CACHE_DIR="$WORK/cache" -- "$DDPIO" bench loader --data "$URL" "${LOADER_FLAGS[@]}" 1
      run cached "$2" DDPIO_S3_CACHE_DIR="$WORK/cache" -- "$DDPIO" bench loader --data "$URL" "${LOADER_FLAGS[@]}" 1 ;;
    s3fs) sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || log "could not drop the page cache (not root?)"
      run s3fs "$2" -- "$DDPIO" bench loader --data "$MNT/$LMDB_PREFIX" "${LOADER_FLAGS[@]}" 1 ;;
    bulk) run bulk "$2" -- "$DDPIO" bench storage --data "$URL" --repeat 1 --threads "$WORKERS" --json ;;
    boto3) run boto3 "$2" -- "$PYTHON" scripts/bench_boto3_loader.py epoch --bucket "$BUCKET" --list "$WORK/photos.json" \
             --workers "$WORKERS" --batch-size "$BATCH" --image-size "$SIZE" --seed "$2" ;;
  esac
}

VARIANTS=(local)
for v in bulk remote per-record block block-lmdb exact-bounded cached s3fs boto3; do skipped "$v" || VARIANTS+=("$v"); done
# The bounded variants' memory budget: a third of the dataset. The block order's window of 4 keeps
# (4 + 2) chunks of 128 records and 8 batches read ahead in use: 1,280 records.
DATA_MB=$(( $(du -sm "$DB" | cut -f1) ))
BOUNDED_MB=$(( DATA_MB / 3 ))
IN_USE_MB=$(( DATA_MB * 1280 / $("$DDPIO" inspect "$DB" --json --quiet 2>/dev/null | tail -1 |
              python3 -c 'import json,sys; print(json.load(sys.stdin)["records"])') ))
log "bounded variants: DDPIO_S3_MEMORY_MB=$BOUNDED_MB for a dataset of ~$DATA_MB MB (block keeps ~$IN_USE_MB MB in use)"
[ "$IN_USE_MB" -lt "$BOUNDED_MB" ] || skipped block ||
  log "warning: a dataset this small does not show a bounded cache (the block row refetches chunks): use --images with more photos"
n=${#VARIANTS[@]}
log "$ROUNDS rounds of: ${VARIANTS[*]} (rotated order), $WORKERS workers, batch $BATCH, ${SIZE} px"
for r in $(seq "$ROUNDS"); do
  for k in $(seq 0 $((n - 1))); do variant "${VARIANTS[$(( (k + r - 1) % n ))]}" "$r"; done
done

# ---- once: later epochs of one remote process; the program's own count over one full pass -----------
if ! skipped remote; then
  run remote-3-epochs 0 -- "$DDPIO" bench loader --data "$URL" "${LOADER_FLAGS[@]}" 3
  "$DDPIO" inspect "$URL" --verify --json --quiet 2>"$WORK/inspect.err" | tail -1 >"$WORK/inspect.json" ||
    log "inspect --verify failed: $(tail -1 "$WORK/inspect.err")"
fi

# ---- summary -------------------------------------------------------------------------------------
python3 - "$WORK" "$ROUNDS" "$WORKERS" "$DDPIO" "$URL" <<'PY'
import json, os, statistics, sys
work, rounds, workers, ddpio, url = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
rows = [json.loads(l) for l in open(os.path.join(work, "results.jsonl"))]
by = {}
for r in rows:
    by.setdefault(r["variant"], {})[r["round"]] = r
local = by["local"]
names = {"local": "(1) `bench loader`, local LMDB", "remote": "(2) `bench loader`, s3://, whole chunks",
         "per-record": "(2b) `bench loader`, s3://, --no-whole-chunks (record by record)",
         "block": "(2c) s3://, --order block --block-window 4, memory 1/3 of the dataset",
         "block-lmdb": "(2e) as (2c), the dataset uploaded as its LMDB file (--chunk-mb 0)",
         "exact-bounded": "(2d) s3://, exact order, memory 1/3 of the dataset",
         "cache-fill": "(3a) s3:// + cache folder, first epoch (fills it)",
         "cached": "(3) s3:// + cache folder, second process (reads it)",
         "s3fs": "(4) `bench loader` on the LMDB through s3fs (ro mount)",
         "boto3": "(5) torch Dataset, one boto3 GET per sample, PIL, DataLoader",
         "bulk": "(0) the store's bulk rate: a GET a 128-record chunk, nothing decoded (records/s)"}
summary = {"rounds": rounds, "workers": int(workers), "ddpio": ddpio, "url": url, "rows": {}}
print(f"| reader | images/s, median (min–max) | / local, median of paired rounds (range) | "
      f"requests per epoch: gateway (ddpio's count) | MB per epoch (gateway GETs) | GETs per image (ddpio's) | "
      f"time to first batch, s | client CPU, ms/image | store CPU (radosgw + OSD), ms/image |")
print("|---|---|---|---|---|---|---|---|---|")
for v in ["local", "bulk", "remote", "per-record", "block", "block-lmdb", "exact-bounded", "cache-fill", "cached", "s3fs", "boto3"]:
    if v not in by:
        continue
    rs = [by[v][k] for k in sorted(by[v]) if k >= 1]
    ips = [r["images_per_s"] for r in rs]
    ratios = [r["images_per_s"] / local[r["round"]]["images_per_s"] for r in rs]
    req = [r["gateway"]["requests"] for r in rs if "gateway" in r]
    mb = [r["gateway"]["get_bytes"] / 1e6 for r in rs if "gateway" in r]
    summary["rows"][v] = {"images_per_s": ips, "median": statistics.median(ips), "ratio_rounds": ratios,
                          "ratio": statistics.median(ratios), "requests": req, "get_mb": mb,
                          "load1_before": [r["load1_before"] for r in rs],
                          "store": [r["store"] for r in rs if "store" in r]}
    req_s = f"{statistics.median(req):,.0f} ({min(req):,}–{max(req):,})" if req else "—"
    own = [r["store"]["requests"] for r in rs if "requests" in r.get("store", {})]
    if own:
        req_s += f" ({statistics.median(own):,.0f})"
    mb_s = f"{statistics.median(mb):,.1f}" if mb else "—"
    per_image = [r["store"]["requests"] / r["records"] for r in rs
                 if "requests" in r.get("store", {}) and r.get("records")]
    per_image_s = f"{statistics.median(per_image):.4f}" if per_image else "—"
    ttfb = [r["time_to_first_batch_s"] for r in rs if r.get("time_to_first_batch_s") is not None]
    ttfb_s = f"{statistics.median(ttfb):.3f}" if ttfb else "—"
    client = [1e3 * r["client_cpu_s"] / r["records"] for r in rs if r.get("client_cpu_s") and r.get("records")]
    store = [1e3 * r["store_cpu_s"] / r["records"] for r in rs if "store_cpu_s" in r and r.get("records")]
    client_s = f"{statistics.median(client):.2f}" if client else "—"
    store_s = f"{statistics.median(store):.2f}" if store else "—"
    summary["rows"][v].update(gets_per_image=per_image, time_to_first_batch_s=ttfb,
                              client_cpu_ms_per_image=client, store_cpu_ms_per_image=store)
    print(f"| {names[v]} | {statistics.median(ips):,.0f} ({min(ips):,.0f}–{max(ips):,.0f}) | "
          f"**{statistics.median(ratios):.2f}** ({min(ratios):.2f}–{max(ratios):.2f}) | {req_s} | {mb_s} | "
          f"{per_image_s} | {ttfb_s} | {client_s} | {store_s} |")
if "bulk" in by:
    # The ceiling when the store shares the cores that decode: the local reader and the bulk fetch as
    # two loads on the same cores, per round; every row's paired ratio to it.
    ceiling = {k: 1 / (1 / local[k]["images_per_s"] + 1 / by["bulk"][k]["images_per_s"])
               for k in by["bulk"] if k in local and k >= 1}
    summary["combined_ceiling"] = ceiling
    print(f"\ncombined ceiling 1 / (1/local + 1/bulk): {statistics.median(ceiling.values()):,.0f} images/s "
          f"({min(ceiling.values()):,.0f}–{max(ceiling.values()):,.0f}); bulk "
          f"{statistics.median(r['bulk_mb_per_s'] for r in by['bulk'].values()):,.0f} MB/s\n")
    print("| reader | / combined ceiling, median of paired rounds (range) |")
    print("|---|---|")
    for v in ["remote", "per-record", "block", "block-lmdb", "exact-bounded", "cache-fill", "cached", "s3fs", "boto3"]:
        rs = [r for k, r in sorted(by.get(v, {}).items()) if k in ceiling]
        if not rs:
            continue
        ratios = [r["images_per_s"] / ceiling[r["round"]] for r in rs]
        summary["rows"][v]["ceiling_ratio"] = statistics.median(ratios)
        print(f"| {names[v]} | **{statistics.median(ratios):.2f}** ({min(ratios):.2f}–{max(ratios):.2f}) |")
extra = by.get("remote-3-epochs", {}).get(0)
if extra:
    j = json.load(open(os.path.join(work, "runs", "remote-3-epochs-0.json")))
    summary["remote_3_epochs"] = {"epochs": j["epoch_images_per_s"], "gateway": extra.get("gateway"),
                                  "store": j.get("store")}
    g = extra.get("gateway")
    print(f"\nremote, 3 epochs in one process: epochs " + ", ".join(f"{x:,.0f}" for x in j["epoch_images_per_s"]) +
          " images/s" + (f"; {g['requests']} requests, {g['get_bytes']/1e6:.1f} MB in all" if g else ""))
try:
    ins = json.load(open(os.path.join(work, "inspect.json")))
    summary["inspect_verify_store"] = ins.get("store")
    print(f"ddpio inspect URL --verify --json: store = {json.dumps(ins.get('store'))}")
except (OSError, ValueError):
    pass
up = json.load(open(os.path.join(work, "upload.json")))
summary["upload"] = up
print(f"upload: {json.dumps(up)}")
loads = [r["load1_before"] for r in rows]
print(f"load average (1 min) before the runs: {min(loads)}–{max(loads)}, median {statistics.median(loads)}")
json.dump(summary, open(os.path.join(work, "summary.json"), "w"), indent=1)
PY
