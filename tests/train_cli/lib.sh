# tests/train_cli/lib.sh — the arguments of the train_cli shell tests (sourced, not run):
# $1 = the program under test (dlcc, or the C trainer sample), $2 = the source dir. Sets $dlcc
# (= $prog) and $src, then sources the shell test harness tests/harness/cli_lib.sh.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $(basename "$0") PROGRAM SOURCE_DIR" >&2
  exit 2
fi
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
prog=$dlcc
src=$(cd "$2" && pwd)
source "$src/tests/harness/cli_lib.sh"

# watch_data: the MLP sample as mlp.dlg and random data for it (x.npy, y.npy: 320 training
# samples; tx.npy, ty.npy: 100 test samples); sets $data, the dlcc train arguments that use them
# in batches of 32 (10 steps per epoch) on 2 threads.
watch_data() {
  cp "$src/samples/mlp_fmnist.dlg" mlp.dlg
  $py - <<'PYEOF' || { echo "FAIL cannot make the data with $py + numpy"; exit 1; }
import numpy as np
r = np.random.default_rng(0)
np.save("x.npy", r.standard_normal((320, 784)).astype(np.float32))
np.save("y.npy", r.integers(0, 10, 320).astype(np.int64))
np.save("tx.npy", r.standard_normal((100, 784)).astype(np.float32))
np.save("ty.npy", r.integers(0, 10, 100).astype(np.int64))
PYEOF
  data=(--dataset npy:x.npy,y.npy --test npy:tx.npy,ty.npy --batch 32 --threads 2)
}
