# tests/dp/lib.sh — what the data-parallel shell tests share (sourced after
# tests/harness/cli_lib.sh, with $dlcc set): skip (exit 77) when mpirun or the MPI plugin next to
# dlcc is missing (tools/setup.sh installs Open MPI, so CI runs them); Open MPI allowed as root;
# LeakSanitizer off (the ASan build), since Open MPI keeps memory at exit in components it has
# unloaded, which no suppression can name; $mpi (mpirun -np 2 on this machine, bounded); runc;
# steps.
if ! command -v mpirun >/dev/null 2>&1; then
  echo "skip: mpirun is missing (tools/setup.sh installs openmpi-bin)"
  exit 77
fi
if [ ! -e "$(dirname "$dlcc")/libdlrt_mpi.so" ]; then
  echo "skip: libdlrt_mpi.so was not built (MPI not found at configure time: libopenmpi-dev)"
  exit 77
fi
if [ "$(id -u)" -eq 0 ]; then # Open MPI refuses root unless told
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
mpi=(timeout 180 mpirun -np 2 --oversubscribe --bind-to none)

runc() { # runc CMD...: captures stdout/stderr in $out/$err, sets $rc
  "$@" >"$out" 2>"$err"
  rc=$?
}

steps() { # steps FILE: test_dp's step lines without the ranks' verdict
  grep '^step ' "$1" | sed 's/ ranks identical$//'
}
