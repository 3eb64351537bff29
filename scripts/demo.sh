#!/usr/bin/env bash
# ddpio's main job end to end on its embedded defaults:
#   synthesise an ImageFolder -> convert it to a ddpio dataset -> verify every record
#   -> benchmark reading it.
# Work files go to $DDPIO_WORK (default /tmp/ddpio-demo), replaced on each run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
DDPIO=build/release/tools/ddpio
WORK=${DDPIO_WORK:-/tmp/ddpio-demo}
rm -rf "$WORK"
mkdir -p "$WORK"
echo "== $($DDPIO info | tail -1)"
echo "== 1/5 synth: 10 classes x 600 images"
$DDPIO synth --out "$WORK/images" --classes 10 --per-class 600 --size 96 --seed 1
echo "== 2/5 convert"
$DDPIO convert --src "$WORK/images" --out "$WORK/train.lmdb"
echo "== 3/5 inspect --verify --decode"
$DDPIO inspect "$WORK/train.lmdb" --verify --decode
echo "== 4/5 bench storage (random order, 2 threads)"
$DDPIO bench storage --data "$WORK/train.lmdb" --order random --threads 2
echo "== 5/5 bench loader (RandomResizedCrop 64 px, 2 workers, 2 epochs)"
$DDPIO bench loader --data "$WORK/train.lmdb" --workers 2 --image-size 64 --epochs 2
echo "== done: dataset at $WORK/train.lmdb"
