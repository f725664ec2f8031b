#!/usr/bin/env bash
# tests/dp/test_dp_loop.sh — the communicator and the bucketed data-parallel step without MPI,
# so they run under every sanitizer with LeakSanitizer on (Open MPI's own allocations keep it off
# in the MPI tests): tests/dp/test_dp.c binds its session to a world of one through the loop
# plugin (tests/dp/loop_plugin.c, loaded by path as libdlrt_mpi.so would be):
#   - 4 KiB buckets (staged pieces), 2 threads (buckets started from the executor's done hook),
#     with and without overlap, and with accumulate = 2 (the loss alone off the boundary): the
#     losses, grad norms and params equal an unbound session's bit for bit (1 rank: scale 1);
#   - an injected failure ($DLRT_LOOP_FAIL_AT) at binding refuses the binding, and one in a
#     step fails it naming the rank; the communicator stays broken (the next step fails at once
#     with the same message) and everything is freed.
# usage: test_dp_loop.sh DLCC TEST_DP LOOP_PLUGIN SOURCE_DIR
set -u
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
prog=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
plugin=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
src=$(cd "$4" && pwd)
source "$src/tests/harness/cli_lib.sh"
runc() { "$@" >"$out" 2>"$err"; rc=$?; } # runc CMD...: captures stdout/stderr, sets $rc

mlp=$src/samples/mlp_fmnist.dlg
sed 's/^  clip_norm = 5.0$/  clip_norm = 5.0\n  accumulate = 2/' "$mlp" > acc.dlg
for spec in "mlp16:$mlp" "acc16:acc.dlg"; do
  IFS=: read -r name file <<<"$spec"
  runc "$dlcc" compile --no-cache -D N=16 "$file" -o "$name.so"
  check "compile $name" test "$rc" -eq 0
done
steps() { grep '^step ' "$1" | sed 's/ ranks identical$//'; }

runc "$prog" single mlp16.so 4 u.bin --threads 2
check "unbound: 4 steps" test "$rc" -eq 0
steps "$out" > u.txt
for ov in 1 0; do
  runc env DLRT_COMM_OVERLAP=$ov "$prog" single mlp16.so 4 l.bin --threads 2 --bucket 4096 \
    --plugin "$plugin"
  check "a world of one (overlap $ov): 4 steps" test "$rc" -eq 0
  grep '^comm:' "$out"
  check "... every gradient and the loss reduced, in 4 buckets" \
    grep -qF "comm: 1 ranks, 4 buckets, 814124 bytes per step" "$out"
  steps "$out" > l.txt
  check "... the unbound session's losses, grad norms and digests" cmp -s u.txt l.txt
  check "... and params, bit for bit" cmp -s u.bin l.bin
done
runc "$prog" single acc16.so 3 ua.bin --accumulate
steps "$out" > ua.txt
runc "$prog" single acc16.so 3 la.bin --accumulate --bucket 4096 --plugin "$plugin"
check "accumulate = 2 in a world of one: 3 steps" test "$rc" -eq 0
steps "$out" > la.txt
check "... the unbound session's losses, grad norms and digests" cmp -s ua.txt la.txt
check "... params bit for bit" cmp -s ua.bin la.bin

runc env DLRT_LOOP_FAIL_AT=1 "$prog" single mlp16.so 2 f.bin --plugin "$plugin"
check "a failure at binding (the start-up check): refused, naming it" \
  grep -qF "rank 0: bind failed after" "$err"
check "... the injected message" grep -qF "injected failure of operation 1 (all-gather)" "$err"
runc env DLRT_LOOP_FAIL_AT=40 "$prog" single mlp16.so 6 f.bin --plugin "$plugin" --bucket 4096
cat "$err"
check "a failure in a step: the step fails, naming the rank" test "$rc" -eq 2 -a \
  "$(grep -cE '^rank 0: step [0-9]+ failed after [0-9.]+ s: data-parallel communication failed: rank 0: injected failure of operation 40 \(all-reduce\)$' "$err")" -eq 1
check "... and the next step fails at once with the same message (the communicator is broken)" \
  grep -qE '^rank 0: step [0-9]+ again: data-parallel communication failed: rank 0: injected failure of operation 40 \(all-reduce\)$' "$err"
finish
