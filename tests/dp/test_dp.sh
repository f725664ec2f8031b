#!/usr/bin/env bash
# tests/dp/test_dp.sh — synchronous data-parallel training over MPI (runtime/rt_comm.c,
# rt_dp.c, the plugin libdlrt_mpi.so), with `mpirun -np 2 --oversubscribe` on this machine
# running tests/dp/test_dp.c on the MLP sample (per-rank batch 16):
#   - params bit-identical on both ranks after every step; the same bits from launch to launch,
#     and for every bucket size and thread count (the reduction's order is fixed per element);
#   - 2 ranks x batch 16 against one process x batch 32 over the same global batches: the first
#     step's mean gradient (Adam's exp_avg / (1 - beta1)) within 1e-5 of the tensor's largest
#     gradient, the losses within 1e-5 relative (the two sum the batch in different orders:
#     float rounding, not bit-identity); with accumulate = 2 as well;
#   - deterministic: one process of 2 chunks x 16 (dlrt_session_set_chunks) gives the 2 ranks'
#     params and optimizer state byte for byte (Adam clipping at 5, SGD with momentum at 3), and
#     without chunks (one batch of 32) they differ; with accumulate = 3 as well (each chunk keeps
#     its own accumulators, as each rank does): after every call, boundary or not, params,
#     Adam's slots and the accumulators byte for byte, over 8 calls (boundaries at 3 and 6, the
#     run ending mid-cycle), and again without chunks they differ;
#   - faults, each bounded: a rank that exits, hangs or runs out of memory mid-run makes rank 0
#     fail within the timeout (3 s here) naming it; a rank with another artifact or another model is refused at
#     binding, on every rank, before any step.
# Exit 77 (skip) only when mpirun or the plugin is missing (tools/setup.sh installs Open MPI).
# usage: test_dp.sh DLCC TEST_DP SOURCE_DIR
set -u
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
prog=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
src=$(cd "$3" && pwd)
source "$src/tests/harness/cli_lib.sh"

source "$src/tests/dp/lib.sh"

mlp=$src/samples/mlp_fmnist.dlg
sed 's/^  clip_norm = 5.0$/  clip_norm = 5.0\n  accumulate = 2/' "$mlp" > acc.dlg
sed 's/^  clip_norm = 5.0$/  clip_norm = 5.0\n  accumulate = 3/' "$mlp" > acc3.dlg
sed 's/256/128/g' "$mlp" > narrow.dlg
sed -e 's/optimizer = adam <lr = 0.001>/optimizer = sgd <lr = 0.05, momentum = 0.9>/' -e 's/clip_norm = 5.0/clip_norm = 3.0/' "$mlp" > sgdm.dlg
for spec in "mlp16:$mlp:16" "mlp32:$mlp:32" "acc16:acc.dlg:16" "acc32:acc.dlg:32" \
            "acc3_16:acc3.dlg:16" "acc3_32:acc3.dlg:32" "narrow16:narrow.dlg:16" "sgdm16:sgdm.dlg:16" "sgdm32:sgdm.dlg:32"; do
  IFS=: read -r name file n <<<"$spec"
  runc "$dlcc" compile --no-cache -D N="$n" "$file" -o "$name.so"
  check "compile $name" test "$rc" -eq 0
done
grep -q 'accumulate = 2' acc.dlg || fail "acc.dlg has accumulate = 2"
grep -q 'accumulate = 3' acc3.dlg || fail "acc3.dlg has accumulate = 3"
grep -q 'momentum = 0.9' sgdm.dlg || fail "sgdm.dlg has SGD with momentum"


# Two ranks, 5 steps, buckets of 256 KiB (w1 alone, the rest together), one thread per rank.
runc "${mpi[@]}" "$prog" train mlp16.so 5 a.bin --bucket 262144
check "2 ranks: 5 steps" test "$rc" -eq 0 -a "$(grep -c ' ranks identical$' "$out")" -eq 5
cat "$out"
# Buckets in order of readiness: one of the loss (forward), b2, w2 and b1 (backward finishes
# them first: each bias before its weight), then w1 (larger than a bucket: alone).
check "2 ranks: 2 buckets, every gradient and the loss reduced" grep -qF "comm: 2 ranks, 2 buckets, 814124 bytes per step" "$out"
steps "$out" > a.txt
runc "${mpi[@]}" "$prog" train mlp16.so 5 b.bin --bucket 262144
steps "$out" > b.txt
check "launch to launch: the same losses and param digests" cmp -s a.txt b.txt
check "launch to launch: the same final params, bit for bit" cmp -s a.bin b.bin
runc "${mpi[@]}" "$prog" train mlp16.so 5 c.bin --threads 2
steps "$out" > c.txt
check "one 25 MiB bucket, 2 threads per rank: the same bits" cmp -s a.txt c.txt
check "... the same final params" cmp -s a.bin c.bin
runc env DLRT_COMM_OVERLAP=0 "${mpi[@]}" "$prog" train mlp16.so 5 d.bin --bucket 4096 --threads 2
steps "$out" > d.txt
check "no overlap, 4 KiB buckets: the same bits" cmp -s a.txt d.txt

# The same global batches in one process of batch 32.
runc "$prog" single mlp32.so 5 s.bin
check "one process, batch 32" test "$rc" -eq 0
steps "$out" > s.txt
cmp_single() { # cmp_single DP.bin DP.txt SINGLE.bin SINGLE.txt
  $py - "$@" <<'PY'
import sys, numpy as np
dp, dpt, sp, spt = sys.argv[1:5]
a = np.fromfile(dp, np.float32); b = np.fromfile(sp, np.float32)
n = a.size // 2
# exp_avg after step 1 is (1 - beta1) g: the first mean gradient, per param tensor.
sizes = [784 * 256, 256, 256 * 10, 10]
if sum(sizes) != n:  # the narrow variant is never compared
    sys.exit(1)
off = n
worst = 0.0
for s in sizes:
    ga, gb = a[off:off + s] / 0.1, b[off:off + s] / 0.1
    worst = max(worst, float(np.max(np.abs(ga - gb)) / max(float(np.max(np.abs(gb))), 1e-30)))
    off += s
la = [float(l.split()[3]) for l in open(dpt)]
lb = [float(l.split()[3]) for l in open(spt)]
lw = max(abs(x - y) / abs(y) for x, y in zip(la, lb))
pw = float(np.max(np.abs(a[:n] - b[:n])))
print(f"2 ranks vs 1 process: first gradient max |diff| / max |g| = {worst:.3g}, "
      f"loss max rel diff = {lw:.3g}, final params max |diff| = {pw:.3g}")
sys.exit(0 if worst <= 1e-5 and lw <= 1e-5 and len(la) == len(lb) else 1)
PY
}
runc cmp_single a.bin a.txt s.bin s.txt
cat "$out"
check "2 ranks x 16 = 1 process x 32 within float rounding" test "$rc" -eq 0

# Gradient accumulation: only every 2nd call communicates (the accumulators).
runc "${mpi[@]}" "$prog" train acc16.so 3 acc.bin --accumulate --bucket 262144
check "accumulate = 2 on 2 ranks: params identical after every step" \
  test "$rc" -eq 0 -a "$(grep -c ' ranks identical$' "$out")" -eq 3
steps "$out" > acc.txt
runc "$prog" single acc32.so 3 accs.bin --accumulate
steps "$out" > accs.txt
runc cmp_single acc.bin acc.txt accs.bin accs.txt
cat "$out"
check "accumulate = 2: 2 ranks = 1 process within float rounding" test "$rc" -eq 0

# Deterministic: one process of 2 chunks of 16 against 2 ranks of 16, byte for byte (params and
# the first step's optimizer slots), with Adam (clip_norm = 5) and SGD + momentum (clip_norm = 3);
# the negative control: one batch of 32 (the same samples) differs.
for art in mlp sgdm; do
  runc "${mpi[@]}" "$prog" train "${art}16.so" 6 "d_$art.bin"
  check "deterministic $art: 2 ranks" test "$rc" -eq 0
  steps "$out" > "d_$art.txt"
  runc "$prog" single "${art}16.so" 6 "c_$art.bin" --chunks 2 --threads 2
  check "deterministic $art: one process of 2 chunks" test "$rc" -eq 0
  steps "$out" > "c_$art.txt"
  echo "deterministic $art, 2 ranks x 16:"; cat "d_$art.txt"
  echo "deterministic $art, 1 process, 2 chunks x 16:"; cat "c_$art.txt"
  check "deterministic $art: 6 steps, the same losses, grad norms and param digests" \
    test "$(wc -l < "c_$art.txt")" -eq 6 -a "$(cat "c_$art.txt")" = "$(cat "d_$art.txt")"
  check "deterministic $art: params and optimizer slots byte for byte" cmp "d_$art.bin" "c_$art.bin"
  runc "$prog" single "${art}32.so" 6 "n_$art.bin"
  steps "$out" > "n_$art.txt"
  echo "negative control $art, 1 process x 32 (no chunks):"; cat "n_$art.txt"
  runc cmp "d_$art.bin" "n_$art.bin"
  check "negative control $art: without chunks the params differ ($(head -c 60 "$out"))" \
    test "$rc" -eq 1
done
# Deterministic with accumulate = 3, call by call (no --accumulate: one line per call, mid-cycle
# ones included), --state: the digest and the file cover every state tensor (Adam's exp_avg and
# exp_avg_sq, each param's grad_accum). 8 calls: boundaries at calls 3 and 6, the run ends 2
# micro-steps into a cycle. Rank 0's accumulators mid-cycle are its own micro-batches' sum, and
# so are chunk 0's; chunk 1's (rank 1's) show in the params of the next boundary.
runc "${mpi[@]}" "$prog" train acc3_16.so 8 d_acc3.bin --state
check "deterministic accumulate = 3: 2 ranks, 8 calls" \
  test "$rc" -eq 0 -a "$(grep -c ' ranks identical$' "$out")" -eq 8
steps "$out" > d_acc3.txt
runc "$prog" single acc3_16.so 8 c_acc3.bin --state --chunks 2 --threads 2
check "deterministic accumulate = 3: one process of 2 chunks" test "$rc" -eq 0
steps "$out" > c_acc3.txt
echo "deterministic accumulate = 3, 2 ranks x 16:"; cat d_acc3.txt
echo "deterministic accumulate = 3, 1 process, 2 chunks x 16:"; cat c_acc3.txt
check "deterministic accumulate = 3: boundaries at calls 3 and 6, the last call mid-cycle" \
  test "$(grep -c ' accum_count 0 ' c_acc3.txt)" -eq 2 -a \
  "$(sed -n '8s/.* accum_count \([0-9]*\) .*/\1/p' c_acc3.txt)" = 2
check "deterministic accumulate = 3: 8 calls, the same losses, grad norms, param and state digests" \
  test "$(wc -l < c_acc3.txt)" -eq 8 -a "$(cat c_acc3.txt)" = "$(cat d_acc3.txt)"
check "deterministic accumulate = 3: params, optimizer slots and accumulators byte for byte" \
  cmp d_acc3.bin c_acc3.bin
runc "$prog" single acc3_32.so 8 n_acc3.bin --state
steps "$out" > n_acc3.txt
echo "negative control accumulate = 3, 1 process x 32 (no chunks):"; cat n_acc3.txt
runc cmp d_acc3.bin n_acc3.bin
check "negative control accumulate = 3: without chunks the state differs ($(head -c 60 "$out"))" \
  test "$rc" -eq 1

# fault_timing NAME T0 T1: rank 0 failed naming rank 1 at step 3, after the 3 s timeout and
# within 6 s, and the whole run ended within 60 s; prints the timings.
fault_timing() {
  local secs wall
  check "... and rank 0 stops naming it" \
    grep -qE "^rank 0: step 3 failed after [0-9.]+ s: .*no answer from rank 1 within 3 s" "$err"
  secs=$(sed -nE 's/^rank 0: step 3 failed after ([0-9.]+) s.*/\1/p' "$err")
  wall=$($py -c "print(round($3 - $2, 2))")
  check "... within 6 s (took ${secs:-?} s), the whole run ends within 60 s (took $wall s)" \
    $py -c "import sys; sys.exit(not (3.0 <= float('${secs:-0}') < 6.0 and $wall < 60))"
  echo "$1 fault: rank 0 failed after ${secs:-?} s; mpirun returned after $wall s"
}
# Faults. A rank that exits (no MPI_Finalize) before its 3rd step: rank 0 fails within the 3 s
# timeout naming rank 1. Open MPI would kill rank 0 as soon as rank 1 exits; the MCA setting
# lets it report, as a trainer on a cluster would.
t0=$(date +%s.%N)
runc env OMPI_MCA_orte_abort_on_non_zero_status=0 "${mpi[@]}" "$prog" train mlp16.so 5 f.bin \
  --timeout 3 --fail-rank 1 --fail-step 2
t1=$(date +%s.%N)
grep -E "rank [01]" "$err" | head -3
check "a rank that exits: the communication error" \
  grep -qE "^rank 0: step 3 failed after [0-9.]+ s: data-parallel communication failed: rank 0: no answer from rank 1 within 3 s" "$err"
fault_timing exit "$t0" "$t1"
# A rank that hangs: the same, and mpirun ends the hung rank once rank 0 has failed.
t0=$(date +%s.%N)
runc "${mpi[@]}" "$prog" train mlp16.so 5 h.bin --timeout 3 --fail-rank 1 --fail-step 2 \
  --fail-mode hang
t1=$(date +%s.%N)
check "a rank that hangs: it leaves" grep -qF "rank 1: leaving before step 3 (hang)" "$err"
fault_timing hang "$t0" "$t1"
# A rank that runs out of memory (its address space capped, a session it creates cannot get its
# arena: DLRT_ERR_NOMEM) and exits on it: rank 0 fails within the timeout naming it.
t0=$(date +%s.%N)
runc env OMPI_MCA_orte_abort_on_non_zero_status=0 "${mpi[@]}" "$prog" train mlp16.so 5 o.bin \
  --timeout 3 --fail-rank 1 --fail-step 2 --fail-mode oom
t1=$(date +%s.%N)
grep -E "^rank [01]: (out of memory|step)" "$err" | head -3
check "a rank out of memory: it says so" grep -qE "^rank 1: out of memory: .*out of memory" "$err"
fault_timing out-of-memory "$t0" "$t1"

# Another artifact (batch 32) or another model (hidden width 128) on rank 1: refused at binding.
mpmd() { timeout 120 mpirun --oversubscribe --bind-to none -np 1 "$prog" train "$1" 2 x.bin : \
  -np 1 "$prog" train "$2" 2 x.bin; }
runc mpmd mlp16.so mlp32.so
check "another artifact on rank 1: both ranks refuse it at binding" \
  test "$(grep -c "bind failed after .*: data-parallel start-up check: rank 1 runs a different artifact than rank 0" "$err")" -eq 2
runc mpmd mlp16.so narrow16.so
check "another model on rank 1: both ranks refuse it, naming rank 1" \
  test "$(grep -c "bind failed after .*: data-parallel start-up check: rank 1's model differs from rank 0's" "$err")" -eq 2
check "... before any step" test "$(grep -c '^step ' "$out")" -eq 0
grep -m1 "start-up check" "$err"
finish
