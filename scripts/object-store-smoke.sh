#!/usr/bin/env bash
# shellcheck disable=SC2015  # `A && B || fail` and word-split pid lists are intended
# Smoke test of scripts/object-store.sh, the local S3 server (CI runs it): up (and up again, which
# must print the same exports), a bucket, a PUT of a few MB and of a small object with curl's SigV4,
# a ranged GET compared byte for byte, a listing, a wrong secret -> 403, a missing bucket -> 404,
# down (and down again), and nothing left behind: no process, no state folder.
# Usage: scripts/object-store-smoke.sh [--bluestore]
#   Uses its own state folder (/tmp/ddpio-s3-smoke-PID), so a server started by hand keeps running.
#   Prints one line per check on stderr, the up/down times last. Exit 0 pass, 1 fail, 2 usage.
#   Installs Ceph on first use (see scripts/object-store.sh).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
STORE=--memstore
case "${1:-}" in
  "") ;;
  --bluestore|--memstore) STORE=$1 ;;
  -h|--help) sed -n '3,/^set -/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  *) echo "object-store-smoke: unknown argument '$1'; see --help" >&2; exit 2 ;;
esac

OS=scripts/object-store.sh
DIR=/tmp/ddpio-s3-smoke-$$
WORK=$(mktemp -d /tmp/ddpio-s3-smoke-data.XXXXXX)
BUCKET=smoke-$$
fail() { echo "object-store-smoke: FAIL: $*" >&2; exit 1; }
ok() { echo "object-store-smoke: ok: $*" >&2; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
cleanup() {
  "$OS" down --dir "$DIR" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'fail "unexpected error (status $?) at line $LINENO: $BASH_COMMAND"' ERR

# Ceph processes that ran before we started (someone else's server); none may be added at the end.
before=$(pgrep 'ceph|radosgw' 2>/dev/null | sort || true)

t=$(now_ms)
exports=$("$OS" up --dir "$DIR" "$STORE" 2>"$WORK/up.err") || fail "up: $(tail -1 "$WORK/up.err")"
up_ms=$(( $(now_ms) - t ))
eval "$exports"
[ -n "${AWS_ENDPOINT_URL:-}" ] && [ -n "${AWS_ACCESS_KEY_ID:-}" ] && [ -n "${AWS_SECRET_ACCESS_KEY:-}" ] &&
  [ -n "${AWS_REGION:-}" ] || fail "up printed no AWS_* exports: $exports"
[ "$(cat "$DIR/env")" = "$exports" ] || fail "$DIR/env differs from what up printed"
ok "up in ${up_ms} ms at $AWS_ENDPOINT_URL"
[ "$("$OS" up --dir "$DIR" 2>/dev/null)" = "$exports" ] || fail "a second up did not print the same exports"
"$OS" status --dir "$DIR" >/dev/null || fail "status does not say up"
ok "second up and status"

# curl with SigV4; prints the HTTP status. $1: secret key; the rest: curl arguments.
s3() {
  local secret=$1; shift
  curl -sS --max-time 60 -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
    --user "$AWS_ACCESS_KEY_ID:$secret" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@" ||
    echo " (curl failed)"
}
S=$AWS_SECRET_ACCESS_KEY
E=$AWS_ENDPOINT_URL

"$OS" mkbucket "$BUCKET" --dir "$DIR" 2>/dev/null || fail "mkbucket $BUCKET"
"$OS" mkbucket "$BUCKET" --dir "$DIR" 2>/dev/null || fail "mkbucket $BUCKET a second time"
ok "bucket $BUCKET (created twice)"

head -c $(( 5 * 1024 * 1024 + 12345 )) /dev/urandom >"$WORK/big.bin"
printf 'hello from ddpio\n' >"$WORK/small.txt"
code=$(s3 "$S" -o "$WORK/put.out" -T "$WORK/big.bin" "$E/$BUCKET/dir/big.bin")
[ "$code" = 200 ] || fail "PUT big.bin: HTTP $code $(head -c 300 "$WORK/put.out")"
code=$(s3 "$S" -o "$WORK/put.out" -T "$WORK/small.txt" "$E/$BUCKET/small.txt")
[ "$code" = 200 ] || fail "PUT small.txt: HTTP $code $(head -c 300 "$WORK/put.out")"
ok "PUT 5 MiB and 17 bytes"

code=$(s3 "$S" -o "$WORK/range.bin" -H 'Range: bytes=1000000-3097151' "$E/$BUCKET/dir/big.bin")
[ "$code" = 206 ] || fail "ranged GET: HTTP $code, expected 206"
dd if="$WORK/big.bin" of="$WORK/expect.bin" iflag=skip_bytes,count_bytes skip=1000000 count=2097152 \
  status=none
cmp -s "$WORK/range.bin" "$WORK/expect.bin" || fail "ranged GET returned other bytes than were PUT"
code=$(s3 "$S" -o "$WORK/tail.bin" -H 'Range: bytes=-100' "$E/$BUCKET/dir/big.bin")
[ "$code" = 206 ] && cmp -s "$WORK/tail.bin" <(tail -c 100 "$WORK/big.bin") ||
  fail "suffix range GET (HTTP $code)"
code=$(s3 "$S" -o "$WORK/small.back" "$E/$BUCKET/small.txt")
[ "$code" = 200 ] && cmp -s "$WORK/small.back" "$WORK/small.txt" || fail "GET small.txt (HTTP $code)"
ok "ranged GETs and GET compare equal"

code=$(s3 "$S" -o "$WORK/list.xml" "$E/$BUCKET?list-type=2")
[ "$code" = 200 ] || fail "list: HTTP $code"
grep -q '<Key>dir/big.bin</Key>' "$WORK/list.xml" && grep -q '<Key>small.txt</Key>' "$WORK/list.xml" &&
  grep -q '<KeyCount>2</KeyCount>' "$WORK/list.xml" ||
  fail "list does not show exactly the 2 keys: $(cat "$WORK/list.xml")"
ok "list shows the 2 keys"

code=$(s3 "not-the-secret" -o "$WORK/denied.xml" "$E/$BUCKET/small.txt")
[ "$code" = 403 ] || fail "wrong secret: HTTP $code, expected 403"
code=$(s3 "$S" -o "$WORK/missing.xml" "$E/no-such-bucket-$$/x")
[ "$code" = 404 ] && grep -q NoSuchBucket "$WORK/missing.xml" ||
  fail "missing bucket: HTTP $code, expected 404 NoSuchBucket"
code=$(s3 "$S" -o "$WORK/missing.xml" "$E/$BUCKET/no-such-key")
[ "$code" = 404 ] && grep -q NoSuchKey "$WORK/missing.xml" ||
  fail "missing key: HTTP $code, expected 404 NoSuchKey"
ok "wrong secret 403, missing bucket and key 404"

t=$(now_ms)
"$OS" down --dir "$DIR" 2>"$WORK/down.err" || fail "down: $(tail -1 "$WORK/down.err")"
down_ms=$(( $(now_ms) - t ))
[ ! -e "$DIR" ] || fail "down left $DIR"
left=$(pgrep -f -- "$DIR/" 2>/dev/null || true)
[ -z "$left" ] || fail "down left processes: $(ps -o pid=,args= -p "${left//$'\n'/,}")"
after=$(pgrep 'ceph|radosgw' 2>/dev/null | sort || true)
new=$(comm -13 <(echo "$before") <(echo "$after") | grep . || true)
[ -z "$new" ] || fail "ceph processes left after down: $(ps -o pid=,stat=,args= -p "${new//$'\n'/,}")"
"$OS" down --dir "$DIR" 2>/dev/null || fail "a second down failed"
if "$OS" status --dir "$DIR" >/dev/null; then fail "status says up after down"; fi
ok "down in ${down_ms} ms; nothing left; down again is fine"
echo "object-store-smoke: PASS (up ${up_ms} ms, down ${down_ms} ms)" >&2
