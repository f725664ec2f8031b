#!/usr/bin/env bash
# tools/main-job.sh — installs dependencies, builds dlcc and runs the main job on a sample:
# check, format and evaluate samples/mlp_fmnist.dlg with the reference evaluator.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build dlcc

dlcc=build/dlcc
model=samples/mlp_fmnist.dlg
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== dlcc check $model"
$dlcc check -v "$model"

echo "== dlcc fmt $model"
$dlcc fmt "$model"

echo "== dlcc run $model (a batch of 128 random images and labels)"
/usr/bin/python3 - "$out" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(0)
np.save(sys.argv[1] + "/x.npy", rng.random((128, 784), dtype=np.float32))
np.save(sys.argv[1] + "/y.npy", rng.integers(0, 10, size=128, dtype=np.int64))
PY
$dlcc run "$model" --backend ref --in x="$out/x.npy" --in y="$out/y.npy" \
  --out probs="$out/probs.npy" --out loss="$out/loss.npy"
/usr/bin/python3 - "$out" <<'PY'
import sys, numpy as np
p = np.load(sys.argv[1] + "/probs.npy"); l = np.load(sys.argv[1] + "/loss.npy")
print(f"probs: {p.dtype}{list(p.shape)}, rows sum to 1: {np.allclose(p.sum(axis=1), 1, atol=1e-5)}")
print(f"first row: {np.array2string(p[0], precision=4)}")
print(f"loss (untrained, expect about ln 10 = 2.30): {float(l):.4f}")
PY
