# tests/dp/lib.sh — what the data-parallel shell tests share (sourced after
# tests/harness/cli_lib.sh, with $dlcc set): skip (exit 77) when mpirun or the MPI plugin next to
# dlcc is missing (tools/setup.sh installs Open MPI, so CI runs them); Open MPI allowed as root;
# LeakSanitizer off (the ASan build), since Open MPI keeps memory at exit in components it has
# unloaded, which no suppression can name; $mpi (mpirun -np 2 on this machine, bounded); runc;
# steps; cmp_ckpt; same_tensors (the checkpoints' metadata holds times: compare tensors).
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

cmp_ckpt() { # cmp_ckpt A B TOL [rel]: the params of two checkpoints agree within TOL (prints the
  # max); rel: each tensor's max |a - b| / max(1, max |b|) instead (prints the worst tensor)
  $py - "$@" <<'PY'
import json, struct, sys, numpy as np
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]], np.float32)
            for k, v in h.items() if k != '__metadata__' and '.' not in k}
a, b = load(sys.argv[1]), load(sys.argv[2])
if len(sys.argv) > 4 and sys.argv[4] == 'rel':
    rel = {k: float(np.max(np.abs(a[k] - b[k]))) / max(1.0, float(np.max(np.abs(b[k])))) for k in b}
    worst = max(rel, key=rel.get)
    d = rel[worst]
    print(f"{len(rel)} params, worst relative difference {d:.3g} ({worst})")
else:
    d = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
    print(f"params max |diff| = {d:.3g} ({', '.join(sorted(a))})")
sys.exit(0 if set(a) == set(b) and d <= float(sys.argv[3]) else 1)
PY
}

same_tensors() { # same_tensors A B: every tensor (params and optimizer state) byte for byte
  $py - "$@" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]]
            for k, v in h.items() if k != '__metadata__'}
a, b = load(sys.argv[1]), load(sys.argv[2])
diff = sorted(k for k in a if a[k] != b.get(k))
print(f"{len(a)} tensors, {sum(map(len, a.values()))} bytes: "
      f"{'identical' if not diff and set(a) == set(b) else 'differ: ' + ', '.join(diff)}")
sys.exit(0 if not diff and set(a) == set(b) else 1)
PY
}
