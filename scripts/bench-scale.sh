#!/usr/bin/env bash
# The cost of scale, on record: what each step of ddpio's data path costs as a dataset grows from
# thousands of records to ImageNet's 1,281,167, and what the loader gets from a dataset larger than
# its job's memory read from a cold disk.
#   source   256 distinct small JPEGs (48 px, made with Pillow; `ddpio synth` without it) and, for
#            each record count, a list file of COUNT lines cycling through them (labels i % 1000).
#            1.28 M records need no 1.28 M files, and decoding stays cheap: what grows is what scales
#            with the record count (index, pages, permutation, checksums), not pixels.
#   convert  ddpio convert --list FILE --root SRC --out WORK/dsN --json (all cores): its images/s
#            and the process's wall seconds
#   verify   ddpio inspect WORK/dsN --verify --json: wall seconds (every record's checksum)
#   first batch  seconds from constructing ddpio.Loader (Python, batch 256, 32 px, WORKERS workers,
#            numpy arrays) to holding its first batch; `bench loader` reports no such time
#   loader   ddpio bench loader --data WORK/dsN --workers WORKERS --epochs 1 --image-size 32
#            --batch-size 256 --sample-images 64 --json: its "images_per_s"; and the process's peak
#            anonymous memory (RssAnon: heap, stacks, batch slots) apart from its file-backed memory
#            (RssFile: the program, its libraries and the LMDB map's pages, which the kernel can drop),
#            from /proc/PID/status read every 50 ms
#   big      the photos of --images repeated by a list file to --big-gb GiB of JPEGs, converted, then
#            the same bench loader three times: (1) after `sync; echo 3 > /proc/sys/vm/drop_caches`,
#            inside a memory cgroup (v1) of --mem-gb GiB, memory + swap, nested in this script's own
#            memory cgroup; (2) after dropping caches, no limit; (3) with the dataset in the page
#            cache, no limit. (1) against (2) is the cost of the limit, (2) against (3) of the disk.
# Every figure is one run (one epoch), on whatever else the machine is doing: the load average
# before each loader run is in the notes and in summary.json. The defaults take roughly 10-20
# minutes on 2 cores and up to ~5 GB of disk (each dataset is removed once measured, unless --keep).
#
# Usage: scripts/bench-scale.sh [--counts N [N...]] [--workers N] [--big-gb G] [--mem-gb G]
#                               [--images DIR] [--skip-big] [--plot FILE] [--work DIR] [--keep]
#   --counts N...  record counts, one row each (default 10000 100000 1281167; a quick check:
#                  --counts 10000 20000)
#   --workers N    loader threads for bench loader and the first batch (default 2)
#   --big-gb G     source JPEG bytes of the big dataset, GiB (default 3: ~35,500 records of /tmp/rp100)
#   --mem-gb G     the cgroup's memory limit for the big dataset's cold run, GiB (default 1)
#   --images DIR   the ImageFolder of photos repeated for the big dataset (default /tmp/rp100:
#                  scripts/real-photos.py --out /tmp/rp100 --count 1500 --long-side 600,800 --quality 95)
#   --skip-big     leave out the big dataset (no root, cgroup or drop_caches needed then)
#   --plot FILE    SVG of convert images/s, loader images/s and peak anonymous memory against the
#                  record count, log x-axis (default WORK/scale.svg: gone with WORK unless --keep)
#   --work DIR     work folder, new or empty (default: a new /tmp/ddpio-bench-scale.XXXXXX); removed
#                  at the end
#   --keep         keep the work folder (datasets, list files, WORK/runs/*.json: one per measured
#                  command, WORK/summary.json)
# Environment: DDPIO (default build/release/tools/ddpio); PYTHON (default /usr/bin/python3, else
#   python3); the Python package of the same build (build/release/python for the default DDPIO)
#   gives the first-batch column.
#   The big runs need root, a cgroup v1 memory controller at /sys/fs/cgroup/memory and a writable
#   /proc/sys/vm/drop_caches (which empties the page cache of the whole machine).
# Output: progress on stderr, the table (Markdown) on stdout, WORK/summary.json, the plot.
# Exit 0 success, 1 runtime error, 2 usage error.
set -euo pipefail
CALLER=$PWD  # --images, --plot and --work are relative to where the script was started
cd "$(dirname "$0")/.."
PROG=bench-scale
HELPER=scripts/bench_scale_report.py

COUNTS=(10000 100000 1281167)
WORKERS=2
BIG_GB=3
MEM_GB=1
IMAGES=/tmp/rp100
IMAGES_GIVEN=0
SKIP_BIG=0
PLOT=""
WORK=""
KEEP=0
DDPIO=${DDPIO:-build/release/tools/ddpio}
DISTINCT=256
SIDE=48
CLASSES=1000
LOADER_FLAGS=(--epochs 1 --image-size 32 --batch-size 256 --sample-images 64 --json)

log() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: $*" >&2; exit 1; }
usage_error() { echo "$PROG: $*; see '$0 --help'" >&2; exit 2; }
usage() { sed -n '2,/^set -/{/^#/s/^# \{0,1\}//p}' "$0"; }
is_gib() { [[ "$1" =~ ^([0-9]+([.][0-9]*)?|[.][0-9]+)$ ]] && awk -v g="$1" 'BEGIN { exit !(g > 0) }'; }
gib_bytes() { awk -v g="$1" 'BEGIN { printf "%d", g * 1073741824 }'; }
from_caller() { case "$1" in /*|"") echo "$1" ;; *) echo "$CALLER/$1" ;; esac; }

while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --counts)
      shift
      COUNTS=()
      while [ $# -gt 0 ] && [[ "$1" != --* ]]; do COUNTS+=("$1"); shift; done
      [ ${#COUNTS[@]} -gt 0 ] || usage_error "--counts needs at least one record count" ;;
    --workers|--big-gb|--mem-gb|--images|--plot|--work)
      [ $# -ge 2 ] || usage_error "$1 needs a value"
      case "$1" in
        --workers) WORKERS=$2 ;; --big-gb) BIG_GB=$2 ;; --mem-gb) MEM_GB=$2 ;;
        --images) IMAGES=$(from_caller "$2"); IMAGES_GIVEN=1 ;;
        --plot) PLOT=$(from_caller "$2") ;; --work) WORK=$(from_caller "$2") ;;
      esac
      shift 2 ;;
    --skip-big) SKIP_BIG=1; shift ;;
    --keep) KEEP=1; shift ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done
for n in "${COUNTS[@]}"; do
  [[ "$n" =~ ^[1-9][0-9]{0,9}$ ]] || usage_error "--counts takes record counts >= 1, not '$n'"
done
mapfile -t COUNTS < <(printf '%s\n' "${COUNTS[@]}" | sort -n -u)
if [ -n "$WORK" ] && [ -e "$WORK" ] && [ -n "$(ls -A "$WORK" 2>/dev/null || echo x)" ]; then
  usage_error "--work $WORK exists and is not an empty folder (the work folder is removed at the end)"
fi
[[ "$WORKERS" =~ ^[1-9][0-9]{0,3}$ ]] || usage_error "--workers must be a number >= 1, not '$WORKERS'"
is_gib "$BIG_GB" || usage_error "--big-gb must be a positive number of GiB, not '$BIG_GB'"
is_gib "$MEM_GB" || usage_error "--mem-gb must be a positive number of GiB, not '$MEM_GB'"
if [ "$SKIP_BIG" = 0 ]; then
  if [ ! -d "$IMAGES" ]; then
    [ "$IMAGES_GIVEN" = 0 ] || usage_error "--images $IMAGES is not a folder"
    die "no photos at $IMAGES for the big dataset (make them: scripts/real-photos.py --out $IMAGES" \
        "--count 1500 --long-side 600,800 --quality 95; or --images DIR, or --skip-big)"
  fi
  awk -v b="$BIG_GB" -v m="$MEM_GB" 'BEGIN { exit !(b > m) }' ||
    log "warning: --big-gb $BIG_GB is not above --mem-gb $MEM_GB: the big dataset fits in the limit"
fi

# ---- tools ---------------------------------------------------------------------------------------
[ -x "$DDPIO" ] || die "DDPIO=$DDPIO is not an executable (build it, or set DDPIO=...)"
DDPIO=$(realpath "$DDPIO")
"$DDPIO" convert --help 2>/dev/null | grep -- '--list' >/dev/null ||
  die "$DDPIO convert has no --list (an older build?)"
PYTHON=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3 || true)}
if [ -z "$PYTHON" ] || ! command -v "$PYTHON" >/dev/null; then
  die "no python3 (apt-get install -y python3; or set PYTHON=...)"
fi
PYPKG=$(realpath -m "$(dirname "$DDPIO")/../python")
FIRST_BATCH=1
if ! PYTHONPATH=$PYPKG "$PYTHON" -c 'import ddpio, numpy' 2>/dev/null; then
  log "no ddpio Python package (with numpy) at $PYPKG for $PYTHON: the first-batch column stays empty"
  FIRST_BATCH=0
fi
CG_PARENT=""
if [ "$SKIP_BIG" = 0 ]; then
  [ "$(id -u)" = 0 ] || die "the big runs need root (cgroup, drop_caches); run as root or --skip-big"
  [ -w /proc/sys/vm/drop_caches ] || die "/proc/sys/vm/drop_caches is not writable: no cold cache (--skip-big)"
  own=$(awk -F: '$2 == "memory" { print $3; exit }' /proc/self/cgroup)
  CG_PARENT=/sys/fs/cgroup/memory${own%/}
  if [ -z "$own" ] || [ ! -w "$CG_PARENT/cgroup.procs" ]; then
    die "no cgroup v1 memory controller at /sys/fs/cgroup/memory (this script's: '$own'); --skip-big"
  fi
fi

# ---- work folder, cleanup ------------------------------------------------------------------------
if [ -z "$WORK" ]; then WORK=$(mktemp -d /tmp/ddpio-bench-scale.XXXXXX); else mkdir -p "$WORK"; fi
WORK=$(realpath "$WORK")
PLOT=${PLOT:-$WORK/scale.svg}
mkdir -p "$WORK/runs" "$WORK/lists" "$(dirname "$PLOT")"
CG=""
MEASURING=""  # the helper's pid while a measured command runs
remove_cgroup() {
  [ -n "$CG" ] && [ -d "$CG" ] || return 0
  local pid
  # Only processes this script put there can be in it: the bench loader it started.
  while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done <"$CG/cgroup.procs"
  for _ in $(seq 50); do rmdir "$CG" 2>/dev/null && break; sleep 0.1; done
  [ ! -d "$CG" ] || log "could not remove the cgroup $CG (rmdir it by hand)"
  CG=""
}
cleanup() {
  local rc=$?
  set +e
  if [ -n "$MEASURING" ]; then  # the helper stops its command, then exits
    kill -TERM "$MEASURING" 2>/dev/null
    wait "$MEASURING" 2>/dev/null
  fi
  remove_cgroup
  if [ "$KEEP" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# measured NAME [--cgroup DIR] -- COMMAND...: runs COMMAND under the helper's sampler; its record
# is WORK/runs/NAME.json. Returns 1 (after showing the command's last stderr lines) if it failed.
# It runs in the background so that a TERM to this script stops it at once (cleanup stops it).
measured() {
  local name=$1 cg=() rc=0
  shift
  if [ "$1" = --cgroup ]; then cg=(--cgroup "$2"); shift 2; fi
  "$PYTHON" "$HELPER" measure --out "$WORK/runs/$name.json" --stdout "$WORK/runs/$name.out" \
    --stderr "$WORK/runs/$name.err" "${cg[@]}" "$@" &
  MEASURING=$!
  wait "$MEASURING" || rc=$?
  MEASURING=""
  if [ "$rc" != 0 ]; then
    tail -5 "$WORK/runs/$name.err" >&2
    return 1
  fi
}
# field NAME EXPR: a Python expression over the record m of WORK/runs/NAME.json, printed.
field() { "$PYTHON" -c 'import json, sys; m = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
            "$WORK/runs/$1.json" "$2"; }

# ---- source: small JPEGs ---------------------------------------------------------------------------
SRC=$WORK/src
if "$PYTHON" -c 'import PIL' 2>/dev/null; then
  log "making $DISTINCT distinct ${SIDE} px JPEGs with Pillow in $SRC"
  "$PYTHON" "$HELPER" images --out "$SRC" --count "$DISTINCT" --size "$SIDE"
  SOURCE_KIND=Pillow
else
  log "no Pillow for $PYTHON: making $DISTINCT JPEGs with ddpio synth in $SRC"
  "$DDPIO" synth --out "$SRC" --classes 4 --per-class $((DISTINCT / 4)) --size "$SIDE" --quiet >&2
  SOURCE_KIND="ddpio synth"
fi

# ---- per record count ------------------------------------------------------------------------------
log "the program's own start, for reference (ddpio --version)"
measured program-start -- "$DDPIO" --version || die "$DDPIO --version failed"
for n in "${COUNTS[@]}"; do
  ds=$WORK/ds$n
  "$PYTHON" "$HELPER" list --root "$SRC" --out "$WORK/lists/n$n.txt" --count "$n" --classes "$CLASSES" >/dev/null
  log "$n records: convert"
  measured "n$n-convert" -- "$DDPIO" convert --list "$WORK/lists/n$n.txt" --root "$SRC" --out "$ds" --json --quiet ||
    die "ddpio convert of $n records failed (WORK/runs/n$n-convert.err)"
  log "$n records: inspect --verify"
  measured "n$n-verify" -- "$DDPIO" inspect "$ds" --verify --json --quiet ||
    die "ddpio inspect --verify of $n records failed (WORK/runs/n$n-verify.err)"
  if [ "$FIRST_BATCH" = 1 ]; then
    log "$n records: time to the first batch (Python ddpio.Loader)"
    PYTHONPATH=$PYPKG "$PYTHON" "$HELPER" first-batch --data "$ds" --workers "$WORKERS" \
      >"$WORK/runs/n$n-first-batch.out" 2>"$WORK/runs/n$n-first-batch.err" ||
      { tail -5 "$WORK/runs/n$n-first-batch.err" >&2; die "the first batch of $n records failed"; }
    tail -1 "$WORK/runs/n$n-first-batch.out" >"$WORK/runs/n$n-first-batch.json"
  fi
  log "$n records: bench loader"
  measured "n$n-loader" -- "$DDPIO" bench loader --data "$ds" --workers "$WORKERS" "${LOADER_FLAGS[@]}" ||
    die "ddpio bench loader on $n records failed (WORK/runs/n$n-loader.err)"
  log "$n records: convert $(field "n$n-convert" 'format(m["result"]["images_per_s"], ",.0f")') images/s," \
      "loader $(field "n$n-loader" 'format(m["result"]["images_per_s"], ",.0f")') images/s," \
      "peak anon $(field "n$n-loader" 'format(m["peak_bytes"]["RssAnon"] / 2**20, ",.0f")') MiB"
  [ "$KEEP" = 1 ] || rm -rf "$ds" "$WORK/lists/n$n.txt"
done

# ---- big: larger than the job's memory, cold ---------------------------------------------------------
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches || die "could not drop the page cache"; }
BIG_RECORDS=0
BIG_FAILED=0
if [ "$SKIP_BIG" = 0 ]; then
  big=$WORK/big
  BIG_RECORDS=$("$PYTHON" "$HELPER" list --root "$IMAGES" --out "$WORK/lists/big.txt" \
                  --bytes "$(gib_bytes "$BIG_GB")" |
                "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["records"])')
  log "big: converting $IMAGES repeated to $BIG_RECORDS records (~$BIG_GB GiB)"
  measured big-convert -- \
    "$DDPIO" convert --list "$WORK/lists/big.txt" --root "$IMAGES" --out "$big" --json --quiet ||
    die "ddpio convert of the big dataset failed (WORK/runs/big-convert.err)"
  "$DDPIO" inspect "$big" --json --quiet 2>"$WORK/runs/big-inspect.err" | tail -1 >"$WORK/runs/big-inspect.json" ||
    die "ddpio inspect of the big dataset failed: $(tail -1 "$WORK/runs/big-inspect.err")"

  log "big: what starting the program reads from a cold disk (ddpio --version)"
  drop_caches
  measured big-program-start -- "$DDPIO" --version || die "ddpio --version failed"

  limit=$(gib_bytes "$MEM_GB")
  CG=$CG_PARENT/ddpio-scale-$$
  { mkdir "$CG" && echo "$limit" >"$CG/memory.limit_in_bytes" &&
    { [ ! -e "$CG/memory.memsw.limit_in_bytes" ] || echo "$limit" >"$CG/memory.memsw.limit_in_bytes"; }; } ||
    die "could not make the memory cgroup $CG with a limit of $limit bytes"
  log "big: bench loader, cold cache, in $CG (limit $MEM_GB GiB)"
  drop_caches
  if ! measured big-cold-limited --cgroup "$CG" -- \
       "$DDPIO" bench loader --data "$big" --workers "$WORKERS" "${LOADER_FLAGS[@]}"; then
    BIG_FAILED=1
    log "bench loader failed inside the $MEM_GB GiB cgroup" \
        "(oom_kill: $(field big-cold-limited 'm["cgroup"].get("oom_kill")'))"
  fi
  remove_cgroup
  log "big: bench loader, cold cache, no limit"
  drop_caches
  measured big-cold -- "$DDPIO" bench loader --data "$big" --workers "$WORKERS" "${LOADER_FLAGS[@]}" ||
    die "ddpio bench loader on the big dataset failed (WORK/runs/big-cold.err)"
  log "big: bench loader, warm cache, no limit"
  find "$big" -type f -exec cat {} + >/dev/null
  measured big-warm -- "$DDPIO" bench loader --data "$big" --workers "$WORKERS" "${LOADER_FLAGS[@]}" ||
    die "ddpio bench loader on the big dataset failed (WORK/runs/big-warm.err)"
  [ "$KEEP" = 1 ] || rm -rf "$big"
fi

# ---- report --------------------------------------------------------------------------------------
"$PYTHON" - "$WORK/params.json" "${COUNTS[*]}" "$WORKERS" "$DDPIO" "$DISTINCT" "$SIDE" "$CLASSES" "$SOURCE_KIND" \
  "${LOADER_FLAGS[*]}" "$SKIP_BIG" "$IMAGES" "$BIG_GB" "$MEM_GB" "$BIG_RECORDS" "$CG_PARENT" <<'PY'
import json, sys
(out, counts, workers, ddpio, distinct, side, classes, kind, flags, skip_big, images, big_gb, mem_gb, big_records,
 cg_parent) = sys.argv[1:]
json.dump({"counts": [int(x) for x in counts.split()], "workers": int(workers), "ddpio": ddpio,
           "distinct_files": int(distinct), "image_side": int(side), "classes": int(classes), "source_kind": kind,
           "loader_flags": flags, "skip_big": skip_big == "1", "big_images": images, "big_gb": float(big_gb),
           "mem_gb": float(mem_gb), "big_records": int(big_records), "cgroup_parent": cg_parent or None},
          open(out, "w"), indent=1)
PY
"$PYTHON" "$HELPER" report --work "$WORK" --plot "$PLOT"
log "summary: $WORK/summary.json; plot: $PLOT"
[ "$KEEP" = 1 ] || [[ "$PLOT" != "$WORK"/* ]] || log "(both go with the work folder: --keep, or --plot FILE elsewhere)"
[ "$BIG_FAILED" = 0 ] || die "bench loader failed in the $MEM_GB GiB cgroup (its row says how); raise --mem-gb?"
