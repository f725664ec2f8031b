#!/usr/bin/env bash
# tests/train_cli/test_fmnist.sh — `dlcc train` end to end on Fashion-MNIST (Debian's
# dataset-fashion-mnist; skipped with a message when it is not installed): one epoch of the MLP
# sample on the first 2048 training samples in batches of 64, the per-epoch line, the test
# accuracy over the 10000 t10k images, and the checkpoint. Needs the training runtime.
# usage: test_fmnist.sh DLCC SOURCE_DIR
source "$(dirname "$0")/lib.sh"
mlp=$src/samples/mlp_fmnist.dlg
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "skip: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"
  finish
fi

expect 0 "train one epoch on 2048 samples" train "$mlp" --dataset fashion-mnist --epochs 1 \
  --batch 64 --limit-train 2048 --save ck.safetensors --lr-schedule cosine
check "the epoch line" grep -qE "^epoch 1: mean loss [0-9.]+(e[-+][0-9]+)?, [0-9.]+ s, [0-9]+ samples/s, skipped 0, data wait [0-9.]+ ms/batch$" "$out"
check "the test accuracy line over 10000 images" grep -qE "^test accuracy: 0\.[0-9]{4} \([0-9]+/10000\)$" "$out"
check "accuracy above 60% after 32 steps" \
  $py -c "import re,sys; m=re.search(r'test accuracy: ([0-9.]+)', open('$out').read()); sys.exit(not (m and float(m.group(1)) > 0.6))"
check "progress: one line per epoch when stderr is not a terminal" \
  test "$(grep -c '^epoch 1/1  step 32/32  loss ' "$err")" -eq 1
check "the checkpoint was written" test -s ck.safetensors

# The data loader's producer count and ring size change nothing but timing: the same losses and
# accuracy with 1 producer and 2 slots as with 4 producers and 16 slots.
expect 0 "1 producer, 2 slots" train "$mlp" --dataset fashion-mnist --epochs 2 --batch 64 \
  --limit-train 640 --loader-threads 1 --prefetch 2
sed 's/, [0-9.]* s, .*samples.s,/,/; s/, data wait.*//' "$out" > one.txt
expect 0 "4 producers, 16 slots" train "$mlp" --dataset fashion-mnist --epochs 2 --batch 64 \
  --limit-train 640 --loader-threads 4 --prefetch 16
sed 's/, [0-9.]* s, .*samples.s,/,/; s/, data wait.*//' "$out" > four.txt
check "identical losses and accuracy whatever the loader's threads" cmp -s one.txt four.txt
check "... over two epochs and a test" test "$(grep -c '^epoch [12]: mean loss' one.txt)" -eq 2 -a \
  "$(grep -c '^test accuracy' one.txt)" -eq 1

expect_msg 1 "--init from a missing file" "missing.safetensors" train "$mlp" --dataset fashion-mnist \
  --batch 64 --limit-train 256 --init missing.safetensors --save out.safetensors
check "... writes no checkpoint and trains no epoch" test ! -e out.safetensors -a ! -s "$out"

expect 0 "a second epoch from the checkpoint" train "$mlp" --dataset fashion-mnist --epochs 1 \
  --batch 64 --limit-train 2048 --init ck.safetensors --seed 1
check "test accuracy again" grep -qE "^test accuracy: " "$out"
finish
