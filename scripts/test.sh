#!/usr/bin/env bash
# The test command: installs dependencies, builds (Release, -Werror) and runs every test,
# including the installed-package consumer check and, against a real S3 server (Ceph's RADOS
# Gateway started here by scripts/object-store.sh, stopped at the end whatever happens), the
# object-store tests (ctest label s3): DDPIO_REQUIRE_S3=1 makes a missing gateway a failure,
# not a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh -DDDPIO_UNITY_BUILD=OFF  # file by file, as CI builds (demo.sh turns it on)
export DDPIO_S3_DIR=${DDPIO_S3_DIR:-/tmp/ddpio-s3-test-$$}
S3_DIR=$DDPIO_S3_DIR
trap 'scripts/object-store.sh down --dir "$S3_DIR" >/dev/null 2>&1 || true' EXIT
S3_ENV=$(scripts/object-store.sh up --dir "$S3_DIR")  # a gateway that does not come up stops the run here
eval "$S3_ENV"
export DDPIO_REQUIRE_S3=1
ctest --preset release -j "$(nproc)"
