#!/usr/bin/env bash
# Installs the Debian 12 packages ddpio needs: with --program, those that build and run the
# `ddpio` program and its libraries (what scripts/demo.sh needs); without, also everything the
# tests, the Python package and the scripts need. Idempotent: when everything is already
# installed it changes nothing and does not touch the network.
# The CUDA toolkit and NCCL are optional (found via CUDA_HOME); they are not installed here.
# Usage: scripts/install-deps.sh [--program]
set -euo pipefail

PROGRAM_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ccache
  liblmdb-dev                     # dataset storage
  libabsl-dev                     # Status, Mutex, strings
  libturbojpeg0-dev libjpeg62-turbo-dev  # JPEG decode/encode (libjpeg-turbo: TurboJPEG and libjpeg APIs)
  libgraphicsmagick1-dev          # convert: PNG, WebP, BMP, TIFF, PPM/PGM sources (one library, fuzzed upstream)
  libsentencepiece-dev            # convert --from jsonl: text tokenized with SentencePiece
  libisal-dev                     # CRC32C record checksums (Intel ISA-L)
  nlohmann-json3-dev              # metadata and --json output
  libcurl4-openssl-dev            # object stores: S3 over HTTP, SigV4 signed by libcurl
  libcli11-dev                    # the ddpio command line
  libgloo-dev                     # CPU collectives over TCP (Gloo)
  libopenblas-dev                 # the trainer's matrix products (chosen over Eigen by measurement)
  libgtest-dev libgmock-dev       # tests (found when the build is configured, so small and always here)
)
TEST_PACKAGES=(
  clang-format                    # scripts/check-format.sh: the tree's C++ as .clang-format says
  lmdb-utils                      # mdb_stat and friends, for looking into a dataset by hand
  python3-torch                   # tests: the sampler against PyTorch, torchrun and its TCPStore
  python3-dev pybind11-dev python3-numpy  # the Python package (python/)
  python3-pytest python3-torchvision python3-pil  # its tests: parity with torch's sampler and torchvision
  sentencepiece python3-sentencepiece  # tests: token ids against SentencePiece's own spm_train / encode
  iproute2 util-linux mount e2fsprogs  # scripts/sim-cluster.sh and the multihost tests: namespaces,
                                       # tc, loop devices, nsenter, mkfs.ext4
  gnuplot-nox                     # scripts/sim-cluster.sh sweep: the report's SVG plots
  prometheus                      # its promtool checks the trainer's --metrics-file (Prometheus text) in the tests
  mate-backgrounds                # 13 camera photographs: the Huffman decoder's real-photo test, scripts/real-photos.py
)

PACKAGES=("${PROGRAM_PACKAGES[@]}")
case "${1:-}" in
  --program) ;;
  "") PACKAGES+=("${TEST_PACKAGES[@]}") ;;
  *) echo "install-deps: unknown argument '$1' (usage: install-deps.sh [--program])" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
