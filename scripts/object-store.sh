#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2086  # `A && B || fail` and word-split pid lists are intended
# A real S3 server on this machine for ddpio's tests and benchmarks: Ceph's RADOS Gateway (Debian 12's
# Ceph 16.2) with one monitor, one OSD and one gateway, run as plain daemons (no systemd, no mgr, no
# kernel modules, no mounts) out of one state folder, and removed without a trace by `down`.
#
# Usage:
#   eval "$(scripts/object-store.sh up)"     # start it; stdout is only the `export AWS_...` lines
#   scripts/object-store.sh mkbucket NAME    # create a bucket (idempotent)
#   scripts/object-store.sh status          # up or not, endpoint, pids (exit 0 up, 1 not up)
#   scripts/object-store.sh down            # stop exactly what `up` started, remove the folder
#
# Commands and options (options go anywhere after the command):
#   up [--dir DIR] [--port PORT] [--listen ADDR] [--memstore|--bluestore] [--size-mb N]
#       Installs ceph-mon ceph-osd radosgw ceph-common when missing (apt-get, sudo when not root;
#       no network when they are present), starts the three daemons and waits (at most
#       DDPIO_S3_UP_TIMEOUT seconds, default 120) until a signed S3 request succeeds. Prints the
#       export lines on stdout and writes them to DIR/env; progress and errors go to stderr.
#       When already up it prints the export lines again. A folder left by a killed earlier run
#       is cleaned first (its leftover daemons stopped).
#       --dir DIR     state folder (default /tmp/ddpio-s3; keep it short: socket paths < 108 chars)
#       --port PORT   the S3 port (default: the first free port from 7480)
#       --listen ADDR the IPv4 address the S3 port listens on (default 127.0.0.1; e.g. a network
#                     namespace's own address, as scripts/sim-cluster.sh --store s3 does)
#       --memstore    objects in the OSD's memory (default; fast; RAM ~2x the data stored)
#       --bluestore   objects in a sparse file DIR/block (slower start; for large data)
#       --size-mb N   the OSD's capacity: default 1024 with memstore, 10240 (at least 512) with
#                     bluestore. Once ~95% full, writes hang (the cluster turns "full"), not fail.
#   down [--dir DIR]        TERM, then KILL after a grace, for the processes in DIR; removes DIR.
#                           Down when already down is fine.
#   status [--dir DIR]      prints up/down, the endpoint and the daemons' pids
#   mkbucket NAME [--dir DIR]
#   restart-gateway [--dir DIR]
#                           kills the gateway (SIGKILL, as a crash) and starts it again on the same
#                           port, waiting until it answers: the store's data survive (fault tests).
#
# Environment: DDPIO_S3_ACCESS_KEY, DDPIO_S3_SECRET_KEY, DDPIO_S3_REGION (defaults ddpio-test-key,
# ddpio-test-secret, us-east-1) name the S3 user `up` creates; DDPIO_S3_DIR is the default --dir.
# The server listens on 127.0.0.1 only (unless --listen) and speaks path-style URLs (http://127.0.0.1:PORT/bucket/key);
# sign requests with SigV4 for service s3 and send `x-amz-content-sha256` (UNSIGNED-PAYLOAD works).
# Send a Content-Length with PUTs (chunked uploads get 411). Idle, the three daemons use ~120 MB.
# Temporary credentials: the gateway also answers STS AssumeRole (POST / Action=AssumeRole, SigV4
# for service sts) for the role arn:aws:iam:::role/ddpio-reader (every S3 action), with sessions
# as short as 1 s (DurationSeconds), so that tests can see a session token expire.
# Ports: S3 PORT, the monitor on two free ports from 13300, the OSD in a free block of 16 from
# 16800. Exit status: 0 success, 1 runtime error, 2 usage error. Needs root only to install.
set -Eeuo pipefail

PROG=object-store
PACKAGES=(ceph-mon ceph-osd radosgw ceph-common)
DIR=${DDPIO_S3_DIR:-/tmp/ddpio-s3}
PORT=""
LISTEN=127.0.0.1
STORE=memstore
SIZE_MB=""
ACCESS_KEY=${DDPIO_S3_ACCESS_KEY:-ddpio-test-key}
SECRET_KEY=${DDPIO_S3_SECRET_KEY:-ddpio-test-secret}
REGION=${DDPIO_S3_REGION:-us-east-1}
UP_TIMEOUT=${DDPIO_S3_UP_TIMEOUT:-120}
GRACE=5              # seconds between TERM and KILL in `down`
MARKER=.ddpio-object-store
RGW_NAME=client.rgw.ddpio
S3_USER=ddpio

log() { echo "$PROG: $*" >&2; }
die() { echo "$PROG: $*" >&2; exit 1; }
usage_error() { echo "$PROG: $*; see '$0 --help'" >&2; exit 2; }
usage() { sed -n '3,/^set -/{/^#/s/^# \{0,1\}//p}' "$0"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
secs() { printf '%d.%d' $(( $1 / 1000 )) $(( $1 % 1000 / 100 )); }   # milliseconds as seconds
secs_since() { secs $(( $(now_ms) - $1 )); }

# ---- arguments ---------------------------------------------------------------------------------
[ $# -gt 0 ] || usage_error "missing command (up, down, status, mkbucket, restart-gateway)"
case "$1" in
  -h|--help|help) usage; exit 0 ;;
  up|down|status|mkbucket) CMD=$1; shift ;;
  restart-gateway) CMD=restart_gateway; shift ;;
  *) usage_error "unknown command '$1'" ;;
esac
BUCKET=""
UP_OPTS=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --dir) [ $# -ge 2 ] || usage_error "--dir needs a value"; DIR=$2; shift 2 ;;
    --dir=*) DIR=${1#--dir=}; shift ;;
    --port|--size-mb)
      [ "$CMD" = up ] || usage_error "$1 is an option of 'up'"
      [ $# -ge 2 ] || usage_error "$1 needs a value"
      if [ "$1" = --port ]; then PORT=$2; else SIZE_MB=$2; fi
      UP_OPTS=1; shift 2 ;;
    --listen)
      [ "$CMD" = up ] || usage_error "$1 is an option of 'up'"
      [ $# -ge 2 ] || usage_error "$1 needs a value"
      [[ "$2" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || usage_error "--listen must be an IPv4 address, not '$2'"
      LISTEN=$2; UP_OPTS=1; shift 2 ;;
    --memstore|--bluestore)
      [ "$CMD" = up ] || usage_error "$1 is an option of 'up'"
      STORE=${1#--}; UP_OPTS=1; shift ;;
    -*) usage_error "unknown option '$1'" ;;
    *)
      [ "$CMD" = mkbucket ] && [ -z "$BUCKET" ] || usage_error "unexpected argument '$1'"
      BUCKET=$1; shift ;;
  esac
done
if [ -n "$PORT" ]; then
  [[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1 ] && [ "$PORT" -le 65535 ] ||
    usage_error "--port must be a port number, not '$PORT'"
fi
if [ -n "$SIZE_MB" ]; then
  [[ "$SIZE_MB" =~ ^[0-9]+$ ]] && [ "$SIZE_MB" -ge 64 ] || usage_error "--size-mb must be a number >= 64"
  # BlueFS (BlueStore's RocksDB) needs ~300 MB of the device for itself.
  [ "$STORE" = memstore ] || [ "$SIZE_MB" -ge 512 ] || usage_error "--size-mb must be >= 512 with --bluestore"
else
  if [ "$STORE" = memstore ]; then SIZE_MB=1024; else SIZE_MB=10240; fi
fi
[[ "$UP_TIMEOUT" =~ ^[0-9]+$ ]] || usage_error "DDPIO_S3_UP_TIMEOUT must be a number of seconds"
if [ "$CMD" = mkbucket ]; then
  [ -n "$BUCKET" ] || usage_error "mkbucket needs a bucket NAME"
  [[ "$BUCKET" =~ ^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$ ]] ||
    usage_error "'$BUCKET' is not a valid bucket name (3-63 of a-z 0-9 . -)"
fi
[ -n "$DIR" ] || usage_error "--dir must not be empty"
DIR=$(realpath -m -- "$DIR")
# Ceph's config files expand $ and split on some characters: keep the path plain.
[[ "$DIR" =~ ^[A-Za-z0-9._/+-]+$ ]] || usage_error "--dir '$DIR' may only contain A-Z a-z 0-9 . _ / + -"
[ "$DIR" != / ] || usage_error "--dir must not be /"
# The longest socket is DIR/run/client.rgw.ddpio.asok; sockets paths must stay below 108 bytes.
[ $(( ${#DIR} + 30 )) -lt 108 ] || usage_error "--dir '$DIR' is too long (admin sockets need < 108 chars)"
CONF=$DIR/ceph.conf

# ---- helpers ---------------------------------------------------------------------------------
# Pids of live processes started with `-c DIR/ceph.conf` (the daemons and any CLI still running).
conf_pids() {
  local re
  re=$(printf '%s' "$CONF" | sed 's/[][\.*^$+?(){}|]/\\&/g')
  pgrep -f -- "-c $re( |\$)" || true
}

# The pid in DIR/run/NAME.pid when that process is alive and was started with our ceph.conf.
daemon_pid() {
  local f=$DIR/run/$1.pid pid
  [ -r "$f" ] || return 1
  pid=$(tr -dc 0-9 <"$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$CONF" || return 1
  echo "$pid"
}

# BUSY[port] is set for every listening TCP port (IPv4 and IPv6), read from /proc/net/tcp*.
declare -A BUSY=()
scan_ports() {
  local f addr st
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    while read -r _ addr _ st _; do
      if [ "$st" = 0A ]; then BUSY[$(( 16#${addr##*:} ))]=1; fi
    done <"$f"
  done
}
# Sets PICKED to the first of $2 (default 1) consecutive free ports from $1 and marks them taken.
# Stays below 32768, where Linux's ephemeral (outgoing) ports start.
pick_ports() {
  local p=$1 n=${2:-1} i
  while [ $(( p + n - 1 )) -le 32767 ]; do
    for (( i = 0; i < n; i++ )); do [ -z "${BUSY[$(( p + i ))]:-}" ] || break; done
    if [ "$i" -eq "$n" ]; then
      PICKED=$p
      for (( i = 0; i < n; i++ )); do BUSY[$(( p + i ))]=1; done
      return 0
    fi
    p=$(( p + i + 1 ))
  done
  die "no $n free TCP port(s) from $1 up to 32767"
}

# One signed S3 request. Prints the HTTP status (000 when nothing answered); body into $3.
s3() {
  local method=$1 path=$2 out=${3:-/dev/null}
  curl -sS -o "$out" -w '%{http_code}' --max-time 10 -X "$method" \
    --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$ENDPOINT$path" 2>/dev/null || true
}

# Loads the endpoint and keys that `up` recorded in DIR/env (so status/mkbucket use what `up` used).
load_env() {
  [ -r "$DIR/env" ] || return 1
  local line k v
  while IFS= read -r line; do
    line=${line#export }; k=${line%%=*}; v=${line#*=}
    v=$(eval "printf '%s' $v")       # the values were written with printf %q
    case "$k" in
      AWS_ENDPOINT_URL) ENDPOINT=$v ;;
      AWS_ACCESS_KEY_ID) ACCESS_KEY=$v ;;
      AWS_SECRET_ACCESS_KEY) SECRET_KEY=$v ;;
      AWS_REGION) REGION=$v ;;
    esac
  done <"$DIR/env"
  [ -n "${ENDPOINT:-}" ]
}

DAEMONS=(mon.a osd.0 "$RGW_NAME")
# 0 when all three daemons run and the gateway answers a signed ListBuckets with 200.
is_up() {
  local d
  for d in "${DAEMONS[@]}"; do daemon_pid "$d" >/dev/null || return 1; done
  load_env || return 1
  [ "$(s3 GET /)" = 200 ]
}

# DIR must be ours (marker present) or absent/empty before we touch or delete anything in it.
check_owned() {
  if [ -e "$DIR" ] && [ ! -e "$DIR/$MARKER" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
    die "$DIR exists and was not made by $PROG; not touching it (choose another --dir)"
  fi
  [ ! -e "$DIR" ] || [ -d "$DIR" ] || die "$DIR exists and is not a folder"
}

# 0 when PID runs (exists and is not a zombie waiting for its parent to reap it).
running() {
  local st
  { read -r _ _ st _ <"/proc/$1/stat"; } 2>/dev/null || return 1
  [ "$st" != Z ]
}
zombie() {
  local st
  { read -r _ _ st _ <"/proc/$1/stat"; } 2>/dev/null || return 1
  [ "$st" = Z ]
}

# TERM the pids in $1; KILL those still running after $2 seconds; returns once none runs.
terminate() {
  local pids=$1 grace=$2 deadline alive p killed=0
  [ -n "${pids// /}" ] || return 0
  kill -TERM $pids 2>/dev/null || true
  deadline=$(( $(now_ms) + grace * 1000 ))
  while :; do
    alive=""
    for p in $pids; do if running "$p"; then alive+=" $p"; fi; done
    [ -n "$alive" ] || return 0
    if [ "$(now_ms)" -ge "$deadline" ]; then
      [ "$killed" = 0 ] || { log "pids$alive survive KILL"; return 0; }
      log "sending KILL to$alive (still running $grace s after TERM)"
      kill -KILL $alive 2>/dev/null || true
      killed=1; deadline=$(( $(now_ms) + 5000 ))
    fi
    sleep 0.02
  done
}

# Stops every process started from DIR, clients (gateway, CLI) first, then the OSD (which tells
# the monitor it is leaving; with the monitor gone it would wait 5 s), then the monitor; waits
# until they have left the process table. stop_all also removes DIR.
stop_all() { stop_procs; rm -rf -- "$DIR"; }
stop_procs() {
  local all p comm clients="" osds="" mons="" deadline
  all=$( { for p in "${DAEMONS[@]}"; do daemon_pid "$p" || true; done; conf_pids; } | sort -un | tr '\n' ' ')
  for p in $all; do
    comm=$(cat "/proc/$p/comm" 2>/dev/null || true)
    case "$comm" in
      ceph-osd) osds+=" $p" ;;
      ceph-mon) mons+=" $p" ;;
      *) clients+=" $p" ;;
    esac
  done
  terminate "$clients" "$GRACE"
  terminate "$osds" "$GRACE"
  terminate "$mons" "$GRACE"
  # Anything started meanwhile (a CLI of an interrupted `up`), found by our conf path only.
  p=$(conf_pids | tr '\n' ' ')
  terminate "$p" 1
  all+=" $p"
  # Exited daemons are orphans: PID 1 reaps them (on some machines only every ~2 s). Wait for
  # that, so that nothing, not even a zombie, is left when `down` returns.
  local reap0; reap0=$(now_ms)
  deadline=$(( reap0 + 10000 ))
  while [ "$(now_ms)" -lt "$deadline" ]; do
    comm=""
    for p in $all; do if zombie "$p"; then comm+=" $p"; fi; done
    [ -n "$comm" ] || break
    sleep 0.05
  done
  REAP_MS=$(( $(now_ms) - reap0 ))
}
REAP_MS=0

lock_dir() {
  exec 9<"$DIR"
  flock -w 60 9 || die "another $PROG is working on $DIR (waited 60 s)"
}

# ---- install ---------------------------------------------------------------------------------
ensure_packages() {
  local missing=() p sudo="" aptlog
  local have
  have=$'\n'$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)$'\n'
  for p in "${PACKAGES[@]}"; do
    [[ "$have" == *$'\n'"$p install ok installed"$'\n'* ]] || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  log "installing ${missing[*]} (Debian's Ceph, ~54 packages, ~1 minute)"
  export DEBIAN_FRONTEND=noninteractive
  aptlog=$(mktemp /tmp/ddpio-object-store-apt.XXXXXX.log)
  { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
    >"$aptlog" 2>&1 || die "apt-get could not install ${missing[*]}; read $aptlog"
  rm -f "$aptlog"
}

# ---- up --------------------------------------------------------------------------------------
write_conf() {
  local osd_store
  if [ "$STORE" = memstore ]; then
    osd_store="osd objectstore = memstore
memstore device bytes = $(( SIZE_MB * 1024 * 1024 ))"
  else
    osd_store="osd objectstore = bluestore
bluestore block path = $DIR/block
bluestore block create = true
bluestore block size = $(( SIZE_MB * 1024 * 1024 ))
bluestore cache autotune = false
bluestore cache size = 134217728
osd memory target = 939524096"
  fi
  cat >"$CONF" <<EOF
# Written by scripts/object-store.sh up; removed by scripts/object-store.sh down.
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:$MON_V2,v1:127.0.0.1:$MON_V1]
auth cluster required = none
auth service required = none
auth client required = none
keyring = $DIR/keyring
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
pid file = $DIR/run/\$name.pid
log file = $DIR/log/\$name.log
mon cluster log file = $DIR/log/cluster.log
crash dir = $DIR/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim allowed = false

[mon]
mon data = $DIR/mon
paxos propose interval = 0.02
paxos min wait = 0.01
mon allow pool delete = true

[osd]
osd data = $DIR/osd
$osd_store
osd crush initial weight = 1
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind port min = $OSD_PORT
ms bind port max = $(( OSD_PORT + 15 ))

[client]
ms mon client mode = crc

[$RGW_NAME]
rgw frontends = beast endpoint=$LISTEN:$PORT tcp_nodelay=1
rgw data = $DIR/rgw
rgw init timeout = $UP_TIMEOUT
rgw dynamic resharding = false
rgw s3 auth use sts = true
rgw sts key = $(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
rgw sts min session duration = 1
EOF
}

print_env() {
  printf 'export AWS_ENDPOINT_URL=%q\n' "$ENDPOINT"
  printf 'export AWS_ACCESS_KEY_ID=%q\n' "$ACCESS_KEY"
  printf 'export AWS_SECRET_ACCESS_KEY=%q\n' "$SECRET_KEY"
  printf 'export AWS_REGION=%q\n' "$REGION"
}

# Names the log of the first daemon that is not running (or the gateway's), for error messages.
failing_log() {
  local d
  for d in "${DAEMONS[@]}"; do
    if ! daemon_pid "$d" >/dev/null; then echo "$DIR/log/$d.log"; return; fi
  done
  echo "$DIR/log/$RGW_NAME.log"
}

# Seconds left of the DDPIO_S3_UP_TIMEOUT budget (at least 1).
time_left() {
  local left=$(( (DEADLINE - $(now_ms)) / 1000 ))
  [ "$left" -ge 1 ] || left=1
  echo "$left"
}
# step WHAT LOG CMD...: runs a setup command within the time left (its output into setup.log);
# dies naming LOG, the log to read, when it fails or runs out of time.
step() {
  local what=$1 logf=$2 rc=0
  shift 2
  timeout --foreground -k 2 "$(time_left)" "$@" >>"$DIR/log/setup.log" 2>&1 9<&- || rc=$?
  [ "$rc" != 0 ] || return 0
  [ "$rc" != 124 ] || die "$what did not finish within DDPIO_S3_UP_TIMEOUT=$UP_TIMEOUT s; read $logf"
  die "$what failed (status $rc); read $logf"
}

UP_DONE=0
FAILED_AT=""
on_up_exit() {
  local rc=$?
  [ "$UP_DONE" = 0 ] || return 0
  trap - INT TERM EXIT ERR
  if [ "$rc" != 0 ] && [ "$rc" != 1 ] && [ "$INTERRUPTED" = 0 ]; then
    log "up failed unexpectedly (status $rc at ${FAILED_AT:-an unknown line}); logs in $DIR/log"
    rc=1
  fi
  if [ "$INTERRUPTED" = 1 ]; then
    log "interrupted; stopping what was started and removing $DIR"
    stop_all
    exit "$rc"
  fi
  # A failed start: stop the daemons but keep DIR for its logs (the error names one).
  stop_procs
  exit "$rc"
}
INTERRUPTED=0

cmd_up() {
  check_owned
  ensure_packages
  if [ -d "$DIR" ]; then
    lock_dir
    if [ -e "$DIR/$MARKER" ] && is_up; then
      log "already up at $ENDPOINT ($DIR)"
      [ "$UP_OPTS" = 0 ] || log "the options of this call are ignored; run 'down' first to change them"
      print_env
      return 0
    fi
    if [ -n "$(ls -A "$DIR")" ]; then
      log "cleaning $DIR left by an earlier run that did not finish or was killed"
      stop_all
    fi
  elif [ -n "$(conf_pids)" ]; then
    log "stopping daemons of an earlier run whose folder $DIR was deleted"
    stop_procs
  fi
  # Ports: checked before anything is created. The OSD binds 8 (4 addresses x msgr v2/v1).
  scan_ports
  if [ -n "$PORT" ]; then
    [ -z "${BUSY[$PORT]:-}" ] || die "port $PORT is in use (pick another --port, or omit it)"
    BUSY[$PORT]=1
  else
    pick_ports 7480; PORT=$PICKED
  fi
  pick_ports 13300; MON_V2=$PICKED
  pick_ports 13300; MON_V1=$PICKED
  pick_ports 16800 16; OSD_PORT=$PICKED

  mkdir -p "$DIR"; lock_dir

  local t0 t
  t0=$(now_ms)
  trap on_up_exit EXIT
  trap 'FAILED_AT="line $LINENO: $BASH_COMMAND"' ERR
  trap 'INTERRUPTED=1; exit 130' INT
  trap 'INTERRUPTED=1; exit 143' TERM
  touch "$DIR/$MARKER"
  mkdir -p "$DIR"/{mon,osd,run,log,crash,rgw}
  : >"$DIR/keyring"

  FSID=$(cat /proc/sys/kernel/random/uuid)
  ENDPOINT=http://$LISTEN:$PORT
  write_conf

  DEADLINE=$(( t0 + UP_TIMEOUT * 1000 ))
  local setup=$DIR/log/setup.log
  : >"$setup"

  # Monitor.
  step monmaptool "$setup" monmaptool --create --fsid "$FSID" \
    --addv a "[v2:127.0.0.1:$MON_V2,v1:127.0.0.1:$MON_V1]" "$DIR/monmap"
  step "ceph-mon --mkfs" "$setup" ceph-mon -c "$CONF" -i a --mkfs --monmap "$DIR/monmap"
  step ceph-mon "$DIR/log/mon.a.log" ceph-mon -c "$CONF" -i a

  # OSD: registered with the monitor and formatted (at once: --mkfs does not need the monitor),
  # then started.
  local osd_uuid osd_id new_pid
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  timeout --foreground "$(time_left)" ceph -c "$CONF" osd new "$osd_uuid" \
    >"$DIR/run/osd-id" 2>>"$setup" 9<&- &
  new_pid=$!
  step "ceph-osd --mkfs" "$DIR/log/osd.0.log" ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid"
  wait "$new_pid" ||
    die "the monitor did not accept the OSD ('ceph osd new'); read $setup and $DIR/log/mon.a.log"
  osd_id=$(cat "$DIR/run/osd-id")
  [ "$osd_id" = 0 ] || die "the monitor gave the OSD id '$osd_id', expected 0; read $setup"
  step ceph-osd "$DIR/log/osd.0.log" ceph-osd -c "$CONF" -i 0
  t=$(secs_since "$t0"); log "mon and osd started in ${t} s"

  # The S3 user (this also creates the gateway's zone and pools), then the gateway.
  step "radosgw-admin user create" "$setup and $DIR/log/osd.0.log" \
    radosgw-admin -c "$CONF" user create --uid "$S3_USER" --display-name "ddpio tests" \
    --access-key "$ACCESS_KEY" --secret-key "$SECRET_KEY"
  # A role the user may assume through STS, for tests of temporary credentials.
  step "radosgw-admin caps add" "$setup" \
    radosgw-admin -c "$CONF" caps add --uid "$S3_USER" --caps "roles=*"
  step "radosgw-admin role create" "$setup" \
    radosgw-admin -c "$CONF" role create --role-name ddpio-reader --path / \
    --assume-role-policy-doc '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam:::user/'"$S3_USER"'"]},"Action":["sts:AssumeRole"]}]}'
  step "radosgw-admin role-policy put" "$setup" \
    radosgw-admin -c "$CONF" role-policy put --role-name ddpio-reader --policy-name all \
    --policy-doc '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":"arn:aws:s3:::*"}]}'
  step radosgw "$DIR/log/$RGW_NAME.log" radosgw -c "$CONF" -n "$RGW_NAME"

  # Ready when a signed request succeeds; then one bucket/object round trip so that the data
  # pools exist before the first test writes.
  local code
  while :; do
    code=$(s3 GET /)
    [ "$code" != 200 ] || break
    [ "$(now_ms)" -lt "$DEADLINE" ] ||
      die "no S3 answer from $ENDPOINT within $UP_TIMEOUT s (last HTTP status $code); read $(failing_log)"
    sleep 0.1
  done
  local probe=ddpio-ready-probe
  code=$(s3 PUT "/$probe")
  [ "$code" = 200 ] || die "creating a bucket failed (HTTP $code); read $DIR/log/$RGW_NAME.log"
  code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 30 -X PUT --data-binary probe \
    --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$ENDPOINT/$probe/probe" 2>/dev/null || true)
  [ "$code" = 200 ] || die "writing an object failed (HTTP $code); read $DIR/log/$RGW_NAME.log"
  s3 DELETE "/$probe/probe" >/dev/null
  s3 DELETE "/$probe" >/dev/null

  print_env >"$DIR/env"
  UP_DONE=1
  trap - INT TERM EXIT ERR
  t=$(secs_since "$t0"); log "up at $ENDPOINT in ${t} s ($STORE, ${SIZE_MB} MB, state in $DIR)"
  print_env
}

# ---- down, status, mkbucket -----------------------------------------------------------------
cmd_down() {
  check_owned
  if [ ! -d "$DIR" ]; then
    if [ -n "$(conf_pids)" ]; then
      log "$DIR is gone but its daemons ran; stopping them"
      stop_procs
      log "down"
    else
      log "already down ($DIR absent)"
    fi
    return 0
  fi
  lock_dir
  [ -d "$DIR" ] || { log "already down ($DIR absent)"; return 0; }
  local t0; t0=$(now_ms)
  stop_all
  if [ "$REAP_MS" -ge 200 ]; then
    log "down in $(secs_since "$t0") s ($DIR removed; $(secs "$REAP_MS") s of it waiting for PID 1" \
      "to reap the exited daemons)"
  else
    log "down in $(secs_since "$t0") s ($DIR removed)"
  fi
}

cmd_status() {
  if [ ! -e "$DIR/$MARKER" ]; then
    local left; left=$(conf_pids | tr '\n' ' ')
    if [ -n "$left" ]; then echo "down, but daemons of a deleted $DIR run (pids $left); 'down' stops them"
    else echo "down ($DIR absent)"; fi
    return 1
  fi
  local d pid pids="" state=up
  for d in "${DAEMONS[@]}"; do
    pid=$(daemon_pid "$d" || true)
    pids+=" $d=${pid:-none}"
    [ -n "$pid" ] || state=broken
  done
  if load_env; then
    if [ "$state" = up ] && [ "$(s3 GET /)" != 200 ]; then state="broken (S3 does not answer)"; fi
  else
    ENDPOINT="(not recorded)"
    [ "$state" != up ] || state="starting"
  fi
  echo "$state"
  echo "endpoint: $ENDPOINT"
  echo "pids:$pids"
  echo "dir: $DIR"
  [ "$state" = up ]
}

cmd_mkbucket() {
  load_env || die "not up ($DIR/env missing); run '$0 up' first"
  local body code
  body=$(mktemp)
  code=$(s3 PUT "/$BUCKET" "$body")
  case "$code" in
    200) rm -f "$body"; log "bucket $BUCKET ready" ;;
    409)
      if grep -q BucketAlreadyOwnedByYou "$body"; then
        rm -f "$body"; log "bucket $BUCKET ready"; return 0
      fi
      rm -f "$body"; die "bucket $BUCKET exists and belongs to another user (HTTP 409)" ;;
    000) rm -f "$body"; die "no answer from $ENDPOINT; is it up? ('$0 status')" ;;
    *) rm -f "$body"; die "creating bucket $BUCKET failed with HTTP $code" ;;
  esac
}

cmd_restart_gateway() {
  [ -e "$DIR/$MARKER" ] || die "not up ($DIR absent): nothing to restart"
  load_env || die "$DIR/env is missing: is it up? ('$0 status')"
  local pid t0
  t0=$(now_ms)
  pid=$(daemon_pid "$RGW_NAME" || true)
  if [ -n "$pid" ]; then
    kill -KILL "$pid" 2>/dev/null || true
    while [ -e "/proc/$pid" ] && ! zombie "$pid"; do sleep 0.05; done
  fi
  DEADLINE=$(( t0 + UP_TIMEOUT * 1000 ))
  step radosgw "$DIR/log/$RGW_NAME.log" radosgw -c "$CONF" -n "$RGW_NAME"
  while [ "$(s3 GET /)" != 200 ]; do
    [ "$(now_ms)" -lt "$DEADLINE" ] || die "the gateway did not answer again within $UP_TIMEOUT s; read $DIR/log/$RGW_NAME.log"
    sleep 0.05
  done
  log "gateway restarted in $(secs_since "$t0") s (was pid ${pid:-none})"
}

"cmd_$CMD"
