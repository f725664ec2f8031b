#!/usr/bin/env bash
# tests/precision/test_fmnist_bf16.sh — `dlcc train` of the MLP sample with `precision = bfloat16`
# (a copy of samples/mlp_fmnist.dlg with the line added to its train block) for one full epoch on
# Fashion-MNIST (Debian's dataset-fashion-mnist; skipped with a message when it is not
# installed): the model checks and compiles, and reaches more than 80% test accuracy.
# usage: test_fmnist_bf16.sh DLCC SOURCE_DIR
source "$2/tests/train_cli/lib.sh"
sed 's/^train loss {$/train loss {\n  precision = bfloat16/' "$src/samples/mlp_fmnist.dlg" > mlp_bf16.dlg
check "the copy has the precision line" grep -qx "  precision = bfloat16" mlp_bf16.dlg
expect 0 "dlcc check of the bfloat16 model" check mlp_bf16.dlg
expect 0 "dlcc compile of the bfloat16 model" compile mlp_bf16.dlg -o mlp_bf16.so
check "... writes the artifact" test -s mlp_bf16.so
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "skip: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"
  finish
fi
expect 0 "train one epoch in bfloat16" train mlp_bf16.dlg --dataset fashion-mnist --epochs 1
check "the epoch line, no skipped step" grep -qE "^epoch 1: mean loss [0-9.]+(e[-+][0-9]+)?, .* skipped 0, data wait [0-9.]+ ms/batch$" "$out"
check "test accuracy above 80% after one epoch" \
  $py -c "import re,sys; m=re.search(r'test accuracy: ([0-9.]+)', open('$out').read()); sys.exit(not (m and float(m.group(1)) > 0.8))"
finish
