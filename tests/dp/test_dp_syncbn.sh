#!/usr/bin/env bash
# tests/dp/test_dp_syncbn.sh — synchronised BatchNorm (the train block's sync_batchnorm = true,
# `dlcc train --sync-bn`) under `mpirun -np 2 dlcc train`, on tests/dp/bn_cnn.dlg (a 2-D and a
# 1-D BatchNormalization) over data whose batches differ in mean and spread:
#   - 2 ranks x batch 16 with synchronised statistics = 1 process x batch 32 with the plain
#     (fused) BatchNormalization, params and running statistics within float rounding; per-rank
#     statistics (DDP's default) differ by orders of magnitude more (negative control);
#   - the same bits from launch to launch, with 1 or 2 threads per rank (the all-reduces inside
#     forward and backward run in one order on every rank whatever thread reaches them);
#   - --sync-bn on the plain model gives the train block's bits; in one process the decomposed
#     BatchNormalization (AllReduceMean is the identity) equals the fused one within rounding;
#   - with accumulate = 2 as well (collectives on every micro-step);
#   - --deterministic (one process of chunks) is refused with a message, and writes nothing.
# Tolerances: 16 SGD-momentum steps in float32 summing the batch in another order; each tensor
# is compared as max |a - b| / max(1, max |b|): rounding gives ~1e-7, per-rank statistics ~1e-2.
# Exit 77 (skip) only when mpirun or the plugin is missing (tools/setup.sh installs Open MPI).
# usage: test_dp_syncbn.sh DLCC SOURCE_DIR
set -u
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
source "$src/tests/harness/cli_lib.sh"

source "$src/tests/dp/lib.sh"

$py - <<'PY'
import numpy as np
r = np.random.default_rng(1)
y = r.integers(0, 5, 256).astype(np.int64)
x = r.standard_normal((256, 2, 6, 6)) * (1 + (np.arange(256) % 3)[:, None, None, None])
x = (x + (y[:, None, None, None] - 2) * 0.7 + 3.0).astype(np.float32)
np.save("x.npy", x); np.save("y.npy", y)
PY
sync=$src/tests/dp/bn_cnn.dlg
sed '/sync_batchnorm/d' "$sync" > plain.dlg
sed 's/^  sync_batchnorm = true$/  sync_batchnorm = true\n  accumulate = 2/' "$sync" > sync_acc.dlg
sed 's/^  sync_batchnorm = true$/  accumulate = 2/' "$sync" > plain_acc.dlg
grep -q 'sync_batchnorm = true' "$sync" || fail "bn_cnn.dlg has sync_batchnorm = true"
grep -q 'sync_batchnorm' plain.dlg && fail "plain.dlg has no sync_batchnorm"
grep -q 'accumulate = 2' sync_acc.dlg plain_acc.dlg || fail "the accumulating models accumulate"
data=(--data x=x.npy --data y=y.npy --epochs 2 --seed 3)



runc "${mpi[@]}" "$dlcc" train "$sync" "${data[@]}" --batch 16 --threads 1 --save ds.safetensors -v
cat "$out"
check "mpirun -np 2 dlcc train (sync_batchnorm): exit 0" test "$rc" -eq 0
check "-v names the synchronised statistics" grep -qF "dlcc: data-parallel: BatchNorm statistics of the global batch (sync_batchnorm: 2 BatchNormalizations, 4 all-reduces each per step)" "$err"
runc "$dlcc" train plain.dlg "${data[@]}" --batch 32 --threads 1 --save sp.safetensors
check "one process, plain BatchNormalization, --batch 32" test "$rc" -eq 0
runc cmp_ckpt ds.safetensors sp.safetensors 1e-5 rel
echo "2 ranks x 16 synchronised vs 1 process x 32: $(cat "$out")"
check "synchronised statistics: 2 ranks x 16 = 1 process x 32 within rounding" test "$rc" -eq 0
runc "${mpi[@]}" "$dlcc" train plain.dlg "${data[@]}" --batch 16 --threads 1 --save dp.safetensors
check "mpirun -np 2, per-rank statistics: exit 0" test "$rc" -eq 0
runc cmp_ckpt dp.safetensors sp.safetensors 1e-3 rel
echo "2 ranks x 16 per-rank statistics vs 1 process x 32: $(cat "$out")"
check "negative control: per-rank statistics differ from the global batch's" test "$rc" -eq 1

runc "${mpi[@]}" "$dlcc" train "$sync" "${data[@]}" --batch 16 --threads 1 --save ds2.safetensors
check "launch to launch: the same tensors, bit for bit" same_tensors ds.safetensors ds2.safetensors
runc "${mpi[@]}" "$dlcc" train "$sync" "${data[@]}" --batch 16 --threads 2 --save ds3.safetensors
check "2 threads per rank: the same tensors, bit for bit" same_tensors ds.safetensors ds3.safetensors
runc "${mpi[@]}" "$dlcc" train plain.dlg "${data[@]}" --batch 16 --threads 1 --sync-bn \
  --save ds4.safetensors
check "--sync-bn on the plain model: exit 0" test "$rc" -eq 0
check "... the train block's bits" same_tensors ds.safetensors ds4.safetensors

runc "$dlcc" train "$sync" "${data[@]}" --batch 32 --threads 1 --save ss.safetensors
runc cmp_ckpt ss.safetensors sp.safetensors 1e-5 rel
echo "1 process x 32 synchronised (AllReduceMean = identity) vs fused: $(cat "$out")"
check "one process: the decomposed BatchNormalization = the fused one within rounding" \
  test "$rc" -eq 0

runc "${mpi[@]}" "$dlcc" train sync_acc.dlg "${data[@]}" --batch 16 --threads 1 \
  --save dsa.safetensors
check "accumulate = 2, synchronised, 2 ranks: exit 0" test "$rc" -eq 0
runc "$dlcc" train plain_acc.dlg "${data[@]}" --batch 32 --threads 1 --save spa.safetensors
runc cmp_ckpt dsa.safetensors spa.safetensors 1e-5 rel
echo "accumulate = 2: 2 ranks x 16 synchronised vs 1 process x 32: $(cat "$out")"
check "accumulate = 2: 2 ranks x 16 synchronised = 1 process x 32 within rounding" \
  test "$rc" -eq 0

runc "$dlcc" train "$sync" "${data[@]}" --batch 32 --deterministic 2 --save det.safetensors
check "--deterministic with sync_batchnorm: refused (exit 1)" test "$rc" -eq 1
check "... saying why" grep -qF "synchronises BatchNorm statistics across ranks (sync_batchnorm" "$err"
check "... and writing no checkpoint" test ! -e det.safetensors
finish
