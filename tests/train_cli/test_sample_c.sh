#!/usr/bin/env bash
# tests/train_cli/test_sample_c.sh — the C trainer sample samples/train_fmnist.c end to end on
# Fashion-MNIST (skipped with a message when Debian's dataset-fashion-mnist is missing): argument
# and data errors, one epoch of the MLP sample on 2048 samples with the 2000 first test images,
# its output lines and checkpoint, and losses that do not depend on the loader's thread count.
# usage: test_sample_c.sh TRAIN_FMNIST SOURCE_DIR
source "$(dirname "$0")/lib.sh"
mlp=$src/samples/mlp_fmnist.dlg

expect_msg 2 "unknown flag" "unknown flag '--frob'" "$mlp" --frob
expect_msg 2 "bad --epochs" "expected an integer in range, got '0'" "$mlp" --epochs 0
expect_msg 1 "missing model" "nope.dlg" nope.dlg
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "skip: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"
  finish
fi
expect_msg 1 "missing data directory" "training data: " "$mlp" --data "$work/none" --batch 64
check "... a located message" grep -qF "$work/none/train-images-idx3-ubyte" "$err"

expect 0 "train one epoch on 2048 samples" "$mlp" --epochs 1 --batch 64 --limit-train 2048 \
  --limit-test 2000 --save ck.safetensors
check "the epoch line" grep -qE "^epoch 1: mean loss [0-9.]+(e[-+][0-9]+)?, [0-9.]+ s, [0-9]+ samples/s, skipped 0, data wait [0-9.]+ ms/batch$" "$out"
check "the test accuracy line over 2000 images" grep -qE "^test accuracy: 0\.[0-9]{4} \([0-9]+/2000\)$" "$out"
check "accuracy above 60% after 32 steps" \
  $py -c "import re,sys; m=re.search(r'test accuracy: ([0-9.]+)', open('$out').read()); sys.exit(not (m and float(m.group(1)) > 0.6))"
check "the checkpoint was written" test -s ck.safetensors
expect 0 "again, 1 loader thread, 2 slots" "$mlp" --epochs 1 --batch 64 --limit-train 2048 \
  --limit-test 2000 --loader-threads 1 --prefetch 2
check "... a cache hit" grep -qF "cache hit" "$err"
sed 's/, [0-9.]* s, .*samples.s,/,/; s/, data wait.*//' "$out" > one.txt
expect 0 "again, 4 loader threads, 16 slots" "$mlp" --epochs 1 --batch 64 --limit-train 2048 \
  --limit-test 2000 --loader-threads 4 --prefetch 16
sed 's/, [0-9.]* s, .*samples.s,/,/; s/, data wait.*//' "$out" > four.txt
check "identical losses and accuracy whatever the loader's threads" cmp -s one.txt four.txt
finish
