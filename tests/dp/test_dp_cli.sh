#!/usr/bin/env bash
# tests/dp/test_dp_cli.sh — `mpirun -np 2 dlcc train` (tools/dlcc.c's --comm, auto-detected under
# mpirun): each rank trains on its shard of the epoch (the loader's DistributedSampler order)
# with --batch 16 and the steps average the two ranks' gradients, so the run matches one process
# with --batch 32 over the same epoch within float rounding; rank 0 alone prints the epoch and
# test lines and writes the checkpoint; a checkpoint resumes with another world size.
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

runc "${mpi[@]}" "$dlcc" train "$mlp" "${data[@]}" --batch 16 --save dp.safetensors -v
cat "$out"
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
cmp_ckpt() { # cmp_ckpt A B TOL: the params of two checkpoints agree within TOL
  $py - "$@" <<'PY'
import json, struct, sys, numpy as np
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]], np.float32)
            for k, v in h.items() if k != '__metadata__' and '.' not in k}
a, b = load(sys.argv[1]), load(sys.argv[2])
d = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
print(f"params max |diff| = {d:.3g} ({', '.join(sorted(a))})")
sys.exit(0 if set(a) == set(b) and d <= float(sys.argv[3]) else 1)
PY
}
# 32 Adam steps at lr 1e-3: the two runs differ by the rounding of the gradient sums.
runc cmp_ckpt dp.safetensors sp.safetensors 1e-5
cat "$out"
check "2 ranks x 16 = 1 process x 32 within float rounding" test "$rc" -eq 0

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
runc "$dlcc" train "$mlp" "${data[@]}" --comm tcp
check "--comm tcp is refused" grep -qF -- "--comm expects auto, mpi or none, got 'tcp'" "$err"
finish
