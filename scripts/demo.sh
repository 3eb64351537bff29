#!/usr/bin/env bash
# ddpio's main job end to end on its embedded defaults:
#   build -> synthesise a training and a validation ImageFolder -> convert both to ddpio datasets
#   -> verify every record -> train the bundled MLP with 4 local ranks in 2 groups over Gloo
#   (each group's leader reads for its peer), printing progress and the validation accuracy.
# Work files go to $DDPIO_WORK (default /tmp/ddpio-demo), replaced on each run.
set -euo pipefail
cd "$(dirname "$0")/.."
# The program only (its libraries included, in unity batches: half the compile time of a cold
# build on two cores): the tests are built by scripts/test.sh, file by file.
scripts/build.sh --target ddpio_cli -DDDPIO_UNITY_BUILD=ON
DDPIO=build/release/tools/ddpio
WORK=${DDPIO_WORK:-/tmp/ddpio-demo}
rm -rf "$WORK"
mkdir -p "$WORK"
echo "== $($DDPIO info | tail -1)"
echo "== 1/4 synth: 10 classes x 1000 training images, 10 x 101 validation images"
$DDPIO synth --out "$WORK/train-images" --classes 10 --per-class 1000 --size 64 --seed 1
$DDPIO synth --out "$WORK/val-images" --classes 10 --per-class 101 --size 64 --seed 2
echo "== 2/4 convert"
$DDPIO convert --src "$WORK/train-images" --out "$WORK/train.lmdb"
$DDPIO convert --src "$WORK/val-images" --out "$WORK/val.lmdb"
echo "== 3/4 inspect --verify --decode"
$DDPIO inspect "$WORK/train.lmdb" --verify --decode
echo "== 4/4 train: 4 ranks in 2 groups (leaders read, peers receive), 6 epochs, checkpoints in $WORK/ckpt"
$DDPIO launch --nproc-per-node 4 -- "$PWD/$DDPIO" train --data "$WORK/train.lmdb" --val "$WORK/val.lmdb" \
  --epochs 6 --batch-size 32 --lr 0.05 --warmup-steps 20 --image-size 32 --hidden 256,128 \
  --group-size 2 --workers 1 --checkpoint-dir "$WORK/ckpt" --progress-every 50
echo "== done: chance is 0.10; the accuracy above is over all 1010 validation samples, each counted once"
echo "   next: ddpio bench storage|loader|feed --data $WORK/train.lmdb (see README)"
