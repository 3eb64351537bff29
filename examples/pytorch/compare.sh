#!/usr/bin/env bash
# Runs train_ddp.py (ddpio.Loader) and compare_dataloader.py (torchvision DataLoader) under Debian's
# torchrun, 4 processes (train_ddp.py: 2 groups of 2), alternately ROUNDS times on the same data,
# round r with --seed r (sampler, augmentation and initial weights), and prints each run's final JSON line (training images/s, validation accuracy).
# Usage: examples/pytorch/compare.sh [WORK_DIR] [ROUNDS]   (needs ddpio on PATH or DDPIO_PROGRAM,
# and the Python package importable by /usr/bin/python3: installed, or PYTHONPATH=build/python)
set -euo pipefail
WORK=${1:-/tmp/ddpio-pytorch-example}
ROUNDS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
DDPIO=${DDPIO_PROGRAM:-ddpio}
mkdir -p "$WORK"
cd "$WORK"
if [[ ! -d train.lmdb ]]; then
  "$DDPIO" synth --out images --classes 10 --per-class 150 --size 96 --quiet
  "$DDPIO" synth --out val-images --classes 10 --per-class 40 --size 96 --seed 7 --quiet
  "$DDPIO" convert --src images --out train.lmdb --quiet
  "$DDPIO" convert --src val-images --out val.lmdb --quiet
fi
torchrun() { /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 4 --redirects 1 --tee 1 "$@"; }
for ((r = 1; r <= ROUNDS; r++)); do
  torchrun "$HERE/train_ddp.py" --data train.lmdb --val val.lmdb --group-size 2 --seed "$r" 2>&1 | grep -E '^\[default0\]:\{' | cut -d: -f2-
  torchrun "$HERE/compare_dataloader.py" --data images --val val-images --seed "$r" 2>&1 | grep -E '^\[default0\]:\{' | cut -d: -f2-
done
