#!/usr/bin/env bash
# tests/train_cli/test_sample_c.sh — the C trainer sample samples/train_fmnist.c end to end on
# Fashion-MNIST (skipped with a message when Debian's dataset-fashion-mnist is missing): argument
# and data errors, one epoch of the MLP sample on 2048 samples with the 2000 first test images,
# its output lines and checkpoint, losses that do not depend on the loader's thread count, and
# a diverging model stopped after --max-skipped-steps non-finite steps (exit 4, nothing saved).
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

# Divergence: Log of a MatMul that goes negative makes every step NaN. The trainer warns at the
# first step and stops after --max-skipped-steps of them (exit 4, nothing saved).
cat > lognan.dlg <<'EOF'
model lognan
dim N = 64
input x : float[N, 784]
input y : int64[N]
param w : float[784, 10] = glorot_uniform(seed = 1)
h = MatMul (x, w)
l = Log (h)
loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (l, y)
output l
train loss {
  optimizer = sgd <lr = 0.1>
}
EOF
expect_msg 4 "a NaN loss stops after 10 steps (the default)" \
  "train_fmnist: error: training diverged at step 10 (epoch 1, batch 10): 10 non-finite steps without 10 finite ones in a row between them (--max-skipped-steps 10); nothing saved" \
  lognan.dlg --batch 64 --limit-train 2048 --save bad.safetensors
check "... warned at step 1" grep -qF "train_fmnist: warning: step 1 (epoch 1, batch 1) is non-finite (loss nan" "$err"
check "... no checkpoint, no epoch line" test ! -e bad.safetensors -a ! -s "$out"
expect_msg 4 "--max-skipped-steps 3" "training diverged at step 3 (epoch 1, batch 3)" lognan.dlg \
  --batch 64 --limit-train 2048 --max-skipped-steps 3
expect 0 "--max-skipped-steps 0 goes on" lognan.dlg --batch 64 --limit-train 256 --limit-test 64 \
  --max-skipped-steps 0
check "... with an epoch of 4 skipped steps" grep -qE "^epoch 1: mean loss -?nan, .* skipped 4," "$out"
finish
