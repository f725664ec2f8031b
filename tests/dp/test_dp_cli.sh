#!/usr/bin/env bash
# tests/dp/test_dp_cli.sh — `mpirun -np 2 dlcc train` (tools/dlcc.c's --comm, auto-detected under
# mpirun): each rank trains on its shard of the epoch (the loader's DistributedSampler order)
# with --batch 16 and the steps average the two ranks' gradients, so the run matches one process
# with --batch 32 over the same epoch within float rounding; rank 0 alone prints the epoch and
# test lines and writes the checkpoint; a checkpoint resumes with another world size;
# --deterministic 2 in one process with --batch 32 writes the 2 ranks' checkpoint byte for byte
# (and without it the params differ), with accumulate = 3 too (--save-every then writes at cycle
# boundaries, and so does Ctrl-C; a mid-cycle checkpoint does not resume data-parallel, one at a
# boundary resumes exactly); a loss that is non-finite on one rank alone (finite
# gradients: one sample's MSE overflows float) stops every rank at the same step, at once (the
# loss is reduced with the gradients), not one rank now and the other at the timeout.
# Exit 77 (skip) only when mpirun or the plugin is missing (tools/setup.sh installs Open MPI).
# usage: test_dp_cli.sh DLCC SOURCE_DIR
set -u
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
prog=$dlcc
src=$(cd "$2" && pwd)
source "$src/tests/harness/cli_lib.sh"

source "$src/tests/dp/lib.sh"

$py - <<'PY'
import numpy as np
r = np.random.default_rng(5)
y = r.integers(0, 10, 512).astype(np.int64)
x = (r.random((512, 784)) * 0.5 + (y[:, None] == np.arange(784) % 10) * 0.5).astype(np.float32)
np.save("x.npy", x); np.save("y.npy", y)
np.save("tx.npy", x[:100]); np.save("ty.npy", y[:100])
PY
mlp=$src/samples/mlp_fmnist.dlg
data=(--dataset npy:x.npy,y.npy --test npy:tx.npy,ty.npy --epochs 2 --seed 3 --threads 1)

runc "${mpi[@]}" "$dlcc" train "$mlp" "${data[@]}" --batch 16 --save dp.safetensors -v \
  --deterministic 2
cat "$out"
cp "$out" "$work/dp_first.out"
grep -E "data-parallel|error" "$err"
check "mpirun -np 2 dlcc train: exit 0" test "$rc" -eq 0
check "rank 0 alone prints the epoch lines" test "$(grep -c '^epoch [12]: mean loss' "$out")" -eq 2
check "... and the test accuracy" test "$(grep -c '^test accuracy: ' "$out")" -eq 1
check "-v names the data-parallel set-up (auto-detected under mpirun)" \
  grep -qF "dlcc: data-parallel: 2 ranks (MPI), a shard of 256 samples and batch 16 each, global batch 32" "$err"
check "the checkpoint was written" test -s dp.safetensors

runc "$dlcc" train "$mlp" "${data[@]}" --batch 32 --save sp.safetensors
check "one process, --batch 32" test "$rc" -eq 0
check "... the same steps per epoch (16)" grep -qE "^epoch 2: " "$out"
# 32 Adam steps at lr 1e-3: the two runs differ by the rounding of the gradient sums.
runc cmp_ckpt dp.safetensors sp.safetensors 1e-5
cat "$out"
check "2 ranks x 16 = 1 process x 32 within float rounding" test "$rc" -eq 0

# --deterministic 2 in one process: 2 chunks of 16 a step, the 2 ranks' checkpoint byte for byte.
runc "$dlcc" train "$mlp" "${data[@]}" --batch 32 --deterministic 2 --save det.safetensors -v
check "dlcc train --batch 32 --deterministic 2: exit 0" test "$rc" -eq 0
check "-v names the chunks" grep -qF "dlcc: deterministic: 2 chunks of batch 16 per step (global batch 32), the bits of 2 data-parallel ranks" "$err"
cp "$out" det.out
runc same_tensors dp.safetensors det.safetensors
echo "2 ranks x 16 vs 1 process --deterministic 2 --batch 32: $(cat "$out")"
check "--deterministic 2 = 2 ranks, byte for byte" test "$rc" -eq 0
runc same_tensors dp.safetensors sp.safetensors
echo "2 ranks x 16 vs 1 process --batch 32 (no flag): $(cat "$out")"
check "negative control: without --deterministic the tensors differ" test "$rc" -eq 1
check "... and the test accuracy is the same" \
  test "$(grep '^test accuracy' det.out)" = "$(grep '^test accuracy' "$work/dp_first.out")"
runc "${mpi[@]}" "$dlcc" train "$mlp" "${data[@]}" --batch 16 --deterministic 3 --epochs 1
check "--deterministic 3 on 2 ranks is refused" \
  grep -qF -- "--deterministic 3: this run has 2 data-parallel ranks" "$err"
runc "$dlcc" train "$mlp" "${data[@]}" --batch 30 --deterministic 4
check "--deterministic 4 with --batch 30 is refused" \
  grep -qF -- "--deterministic 4 in one process needs --batch, the global batch: a multiple of 4" "$err"

# --deterministic with accumulate = 3: 32 steps (16 a epoch), --save-every 4. Every rank (chunk)
# sums its own micro-batches until the boundary and a checkpoint holds rank 0's accumulators
# only, so the --save-every checkpoints wait for the boundaries (due at 4, 8, ..., written at
# 6, 9, 12, 18, 21, 24, 30); the final one, 2 micro-steps into a cycle, is byte for byte the
# 2 ranks' (rank 0's accumulators = chunk 0's) and cannot be resumed data-parallel.
sed 's/^  clip_norm = 5.0$/  clip_norm = 5.0\n  accumulate = 3/' "$mlp" > acc3.dlg
grep -q 'accumulate = 3' acc3.dlg || fail "acc3.dlg has accumulate = 3"
runc "${mpi[@]}" "$dlcc" train acc3.dlg "${data[@]}" --batch 16 --save dpa.safetensors \
  --save-every 4 -v
check "accumulate = 3 on 2 ranks: exit 0" test "$rc" -eq 0
grep -oE "step [0-9]+: wrote" "$err" | tr '\n' ' ' > dpa.saves
echo "2 ranks, accumulate = 3, --save-every 4: $(cat dpa.saves)"
check "... --save-every writes at the cycle boundaries" \
  test "$(cat dpa.saves)" = "step 6: wrote step 9: wrote step 12: wrote step 18: wrote step 21: wrote step 24: wrote step 30: wrote "
runc "$dlcc" train acc3.dlg "${data[@]}" --batch 32 --deterministic 2 --save deta.safetensors \
  --save-every 4 -v
check "accumulate = 3, --deterministic 2: exit 0" test "$rc" -eq 0
grep -oE "step [0-9]+: wrote" "$err" | tr '\n' ' ' > deta.saves
check "... the same checkpoints" test "$(cat deta.saves)" = "$(cat dpa.saves)"
runc same_tensors dpa.safetensors deta.safetensors
echo "accumulate = 3: 2 ranks x 16 vs 1 process --deterministic 2 --batch 32: $(cat "$out")"
check "accumulate = 3: --deterministic 2 = 2 ranks (params, slots, accumulators) byte for byte" \
  test "$rc" -eq 0
runc "$dlcc" train acc3.dlg "${data[@]}" --batch 32 --save spa.safetensors
runc same_tensors dpa.safetensors spa.safetensors
check "accumulate = 3, negative control: without --deterministic the tensors differ" \
  test "$rc" -eq 1
runc "$dlcc" train acc3.dlg "${data[@]}" --batch 32 --deterministic 2 --epochs 3 \
  --resume deta.safetensors
check "... a mid-cycle checkpoint does not resume data-parallel (exit 1)" test "$rc" -eq 1
check "... saying why" grep -qF "saved 2 micro-steps into an accumulation cycle (accumulate = 3); it holds rank 0's accumulators only" "$err"
# A checkpoint at a boundary (3 epochs: 48 steps) resumes exactly: 1 more epoch after it gives
# the tensors of 4 epochs in one go (chunk 1's accumulators start again at zero, as they were).
runc "$dlcc" train acc3.dlg "${data[@]}" --batch 32 --deterministic 2 --epochs 3 --save b3.safetensors
runc "$dlcc" train acc3.dlg "${data[@]}" --batch 32 --deterministic 2 --epochs 4 \
  --resume b3.safetensors --save b4r.safetensors
check "... one saved at a boundary resumes (exit 0)" test "$rc" -eq 0
runc "$dlcc" train acc3.dlg "${data[@]}" --batch 32 --deterministic 2 --epochs 4 --save b4.safetensors
runc same_tensors b4.safetensors b4r.safetensors
echo "accumulate = 3, --deterministic 2: 4 epochs vs 3 + resumed 1: $(cat "$out")"
check "... and goes on exactly" test "$rc" -eq 0
# Ctrl-C in such a run waits for the cycle's end: sent once 100 steps are logged (step 100 is 1
# micro-step into a cycle), the run stops at a multiple of 3, and the checkpoint resumes to the
# tensors of the run never stopped (60 epochs: 960 steps).
acc_long=(train acc3.dlg "${data[@]}" --batch 32 --deterministic 2 --epochs 60)
runc "$dlcc" "${acc_long[@]}" --save ref60.safetensors
"$dlcc" "${acc_long[@]}" --save cut.safetensors --log cut.jsonl >cut.out 2>cut.err &
pid=$!
for _ in $(seq 1 12000); do
  if [ -f cut.jsonl ] && [ "$(wc -l < cut.jsonl)" -ge 100 ]; then break; fi
  sleep 0.01
done
kill -INT "$pid"
wait "$pid"
rc=$?
cut_at=$(sed -nE 's/^dlcc train: interrupted at step ([0-9]+) .*/\1/p' cut.err)
echo "accumulate = 3, --deterministic 2, SIGINT after 100 logged steps: stopped at step ${cut_at:-?}"
check "Ctrl-C with accumulate = 3: exit 130" test "$rc" -eq 130
check "... at a cycle boundary (step ${cut_at:-?}, a multiple of 3, at least 100)" \
  test "${cut_at:-0}" -ge 100 -a "$(( ${cut_at:-1} % 3 ))" -eq 0
runc "$dlcc" "${acc_long[@]}" --resume cut.safetensors --save res60.safetensors
check "... it resumes (exit 0)" test "$rc" -eq 0
runc same_tensors ref60.safetensors res60.safetensors
echo "accumulate = 3, --deterministic 2: 60 epochs vs interrupted + resumed: $(cat "$out")"
check "... to the tensors of the run never stopped" test "$rc" -eq 0

# Resuming with another world size: the 2-rank checkpoint in one process, and the one-process
# checkpoint on 2 ranks (rank 0 reads it; binding broadcasts it).
runc "$dlcc" train "$mlp" "${data[@]}" --epochs 1 --batch 32 --init dp.safetensors --save r1.safetensors
check "a 2-rank checkpoint resumes in one process" test "$rc" -eq 0
runc "${mpi[@]}" "$dlcc" train "$mlp" "${data[@]}" --epochs 1 --batch 16 --init sp.safetensors \
  --save r2.safetensors
check "a 1-process checkpoint resumes on 2 ranks" test "$rc" -eq 0
runc cmp_ckpt r1.safetensors r2.safetensors 1e-5
cat "$out"
check "... and both continue alike" test "$rc" -eq 0
runc "${mpi[@]}" "$dlcc" train "$mlp" "${data[@]}" --batch 16 --comm none --epochs 1
check "--comm none under mpirun: two independent runs" \
  test "$rc" -eq 0 -a "$(grep -c '^epoch 1: mean loss' "$out")" -eq 2
# One rank's loss alone non-finite: sample 37 has x = 0 and target 1e20, so its batch's MSE is
# inf in float while every gradient stays finite (the global norm is summed in double).
cat >reg.dlg <<'DLG'
model reg
dim N = 8

input  x : float[N, 1]
input  t : float[N, 1]

param  w : float[1, 1] = zeros
param  b : float[1]    = zeros

p      = Gemm (x, w, b)
loss   = MeanSquaredError <reduction = "mean"> (p, t)

output p
output loss

train loss {
  optimizer = sgd <lr = 0.1>
  clip_norm = 1.0
}
DLG
$py -c "
import numpy as np
x = np.ones((64, 1), np.float32); t = 2 * x
x[37] = 0; t[37] = 1e20
np.save('rx.npy', x); np.save('rt.npy', t)"
t0=$(date +%s.%N)
runc env OMPI_MCA_orte_abort_on_non_zero_status=0 DLRT_COMM_TIMEOUT=30 "${mpi[@]}" "$dlcc" train \
  reg.dlg --data x=rx.npy --data t=rt.npy --max-skipped-steps 1 --epochs 2 --seed 1
wall=$($py -c "print(round($(date +%s.%N) - $t0, 2))")
grep -E "warning|error" "$err" | cut -c1-160
echo "one rank's loss non-finite: every rank stopped after $wall s (the timeout is 30 s)"
check "one rank's non-finite loss: rank 0 reports the divergence" \
  grep -qE "^dlcc train: error: training diverged at step [0-9]+ " "$err"
check "... no rank waits for another (no timeout)" test "$(grep -c 'no answer from rank' "$err")" -eq 0
check "... every rank stops at once (took $wall s, well under the 30 s timeout)" \
  $py -c "import sys; sys.exit(not $wall < 20)"
runc "$dlcc" train "$mlp" "${data[@]}" --comm tcp
check "--comm tcp is refused" grep -qF -- "--comm expects auto, mpi or none, got 'tcp'" "$err"
finish
