#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-16, ASan + UBSan; `cmake --preset fuzz`) and runs each for
# SECONDS (default 60) from its committed seed corpus, tests/fuzz/corpus/<target>/, on a copy:
# the committed corpus only changes when you copy new inputs back on purpose.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]      (CI: scripts/fuzz.sh 15)
# Prints per target: executions, seconds, crashes; exits 1 if any target crashed, hung or leaked,
# leaving the reproducer under build/fuzz/findings/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
shift || true
scripts/install-deps.sh >/dev/null
if ! command -v clang++-16 >/dev/null || [ ! -e /usr/lib/llvm-16/lib/clang/16/lib/linux/libclang_rt.fuzzer-x86_64.a ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang-16 libfuzzer-16-dev libclang-rt-16-dev >/dev/null
fi
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  for f in tests/fuzz/*_fuzz.cc; do TARGETS+=("$(basename "$f" .cc)"); done
fi
WORK=$(mktemp -d /tmp/ddpio-fuzz.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failed=0
printf '%-24s %12s %8s %s\n' target executions seconds result
for t in "${TARGETS[@]}"; do
  mkdir -p "$WORK/$t" "build/fuzz/findings/$t"
  [ -d "tests/fuzz/corpus/$t" ] && cp -r "tests/fuzz/corpus/$t/." "$WORK/$t/"
  log="build/fuzz/findings/$t/last.log"
  start=$(date +%s)
  if build/fuzz/tests/fuzz/"$t" "$WORK/$t" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=2560 \
       -artifact_prefix="build/fuzz/findings/$t/" -print_final_stats=1 >"$log" 2>&1; then
    result=ok
  else
    result="FAILED (see $log)"
    failed=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  printf '%-24s %12s %8s %s\n' "$t" "$execs" "$(( $(date +%s) - start ))" "$result"
done
exit $failed
