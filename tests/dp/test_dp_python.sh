#!/usr/bin/env bash
# tests/dp/test_dp_python.sh — the Python binding's data parallelism (dlcc.Comm,
# Session.bind_comm) under `mpirun -np 2 python3 tests/dp/dp_python.py`, with an mpi4py
# communicator and with MPI's world opened by libdlrt. Exit 77 (skip) only when mpirun, mpi4py
# or the plugin is missing (tools/setup.sh installs openmpi-bin and python3-mpi4py).
# usage: test_dp_python.sh BUILD_DIR SOURCE_DIR
set -u
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
prog=/usr/bin/python3
source "$src/tests/harness/cli_lib.sh"
if ! command -v mpirun >/dev/null 2>&1 || ! $py -c 'import mpi4py' 2>/dev/null ||
   [ ! -e "$build/libdlrt_mpi.so" ]; then
  echo "skip: needs mpirun, python3-mpi4py and libdlrt_mpi.so (tools/setup.sh installs them)"
  exit 77
fi
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
export PYTHONPATH=$src/python DLCC_BUILD_DIR=$build
mpi=(timeout 120 mpirun -np 2 --oversubscribe --bind-to none)
for how in "" --world; do
  "${mpi[@]}" $py "$src/tests/dp/dp_python.py" "$src/samples/mlp_fmnist.dlg" $how >"$out" 2>"$err"
  rc=$?
  cat "$out"
  name=${how:-with MPI.COMM_WORLD}
  check "mpirun -np 2 python3 dp_python.py $name" \
    test "$rc" -eq 0 -a "$(grep -c 'ranks identical$' "$out")" -eq 3 -a "$(tail -1 "$out")" = ok
done
finish
