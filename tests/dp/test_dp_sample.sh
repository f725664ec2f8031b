#!/usr/bin/env bash
# tests/dp/test_dp_sample.sh — the C trainer sample samples/train_fmnist.c under
# `mpirun -np 2` (its --comm, auto-detected): each rank trains on its shard of 2048 Fashion-MNIST
# samples with --batch 32, rank 0 alone prints the epoch and test lines and writes the
# checkpoint, and the params match one process with --batch 64 over the same epoch within float
# rounding; --comm none runs two independent trainings; a bad --comm is refused.
# Exit 77 (skip) when mpirun, the MPI plugin or Debian's dataset-fashion-mnist is missing.
# usage: test_dp_sample.sh TRAIN_FMNIST DLCC SOURCE_DIR
set -u
prog=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
dlcc=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
src=$(cd "$3" && pwd)
source "$src/tests/harness/cli_lib.sh"

source "$src/tests/dp/lib.sh"
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "skip: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"
  exit 77
fi
mlp=$src/samples/mlp_fmnist.dlg
args=(--epochs 1 --limit-train 2048 --limit-test 2000 --threads 1 --loader-threads 1 --seed 4)

runc "${mpi[@]}" "$prog" "$mlp" "${args[@]}" --batch 32 --save dp.safetensors
cat "$out"
grep -E "data-parallel|error" "$err"
check "mpirun -np 2 train_fmnist: exit 0" test "$rc" -eq 0
check "rank 0 alone prints the epoch line" test "$(grep -c '^epoch 1: mean loss' "$out")" -eq 1
check "... and the test accuracy over 2000 images" \
  test "$(grep -cE '^test accuracy: 0\.[0-9]{4} \([0-9]+/2000\)$' "$out")" -eq 1
check "the data-parallel set-up is named (auto-detected under mpirun)" \
  grep -qF "train_fmnist: data-parallel: 2 ranks (MPI), a shard of 1024 samples and batch 32 each, global batch 64" "$err"
check "the checkpoint was written" test -s dp.safetensors

runc "$prog" "$mlp" "${args[@]}" --batch 64 --save sp.safetensors
check "one process, --batch 64" test "$rc" -eq 0
runc cmp_ckpt dp.safetensors sp.safetensors 1e-4
echo "2 ranks x 32 vs 1 process x 64: $(cat "$out")"
# 32 Adam steps (lr 1e-3) after sums in another order: Adam's division by sqrt(v) magnifies the
# rounding of tiny gradients, so the bound is a tenth of one step's size (measured: ~7e-6).
check "2 ranks x 32 = 1 process x 64 within float rounding" test "$rc" -eq 0

runc "${mpi[@]}" "$prog" "$mlp" "${args[@]}" --batch 32 --comm none --limit-train 256
check "--comm none under mpirun: two independent runs" \
  test "$rc" -eq 0 -a "$(grep -c '^epoch 1: mean loss' "$out")" -eq 2
runc "$prog" "$mlp" --comm tcp
check "--comm tcp is refused" grep -qF -- "--comm expects auto, mpi or none, got 'tcp'" "$err"
finish
