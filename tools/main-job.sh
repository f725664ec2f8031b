#!/usr/bin/env bash
# tools/main-job.sh — installs dependencies, builds dlcc and runs the main job on a sample:
# check and format samples/mlp_fmnist.dlg, compile it to native code, run the compiled artifact
# on a batch and compare its outputs with the reference evaluator's, then train it on
# Fashion-MNIST (Debian's dataset-fashion-mnist) for 2 epochs and report the test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build dlcc dlcc-cache dlrt dlcc_shared train_fmnist

dlcc=build/dlcc
model=samples/mlp_fmnist.dlg
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== dlcc check $model"
$dlcc check -v "$model"

echo "== dlcc fmt $model"
$dlcc fmt "$model"

echo "== dlcc compile -v $model"
$dlcc compile -v "$model" -o "$out/mlp_fmnist.so"

echo "== dlcc run (compiled artifact, then reference evaluator) on a batch of 128 random images"
/usr/bin/python3 - "$out" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(0)
np.save(sys.argv[1] + "/x.npy", rng.random((128, 784), dtype=np.float32))
np.save(sys.argv[1] + "/y.npy", rng.integers(0, 10, size=128, dtype=np.int64))
PY
$dlcc run "$out/mlp_fmnist.so" --in x="$out/x.npy" --in y="$out/y.npy" \
  --out probs="$out/probs.npy" --out loss="$out/loss.npy"
$dlcc run "$model" --backend ref --in x="$out/x.npy" --in y="$out/y.npy" \
  --out probs="$out/probs_ref.npy" --out loss="$out/loss_ref.npy"
/usr/bin/python3 - "$out" <<'PY'
import sys, numpy as np
d = sys.argv[1]
p, l = np.load(d + "/probs.npy"), np.load(d + "/loss.npy")
pr, lr = np.load(d + "/probs_ref.npy"), np.load(d + "/loss_ref.npy")
print(f"probs: {p.dtype}{list(p.shape)}, rows sum to 1: {np.allclose(p.sum(axis=1), 1, atol=1e-5)}")
print(f"first row: {np.array2string(p[0], precision=4)}")
print(f"loss (untrained, expect about ln 10 = 2.30): {float(l):.4f}")
print(f"compiled vs reference: max |diff| probs {np.abs(p - pr).max():.2e}, loss {abs(float(l) - float(lr)):.2e}")
PY

echo "== dlcc train $model --dataset fashion-mnist --epochs 2 (compiled train step: forward, backward, Adam)"
$dlcc train "$model" --dataset fashion-mnist --epochs 2 --save "$out/mlp_fmnist.safetensors"
echo "checkpoint: $(stat -c %s "$out/mlp_fmnist.safetensors") bytes (params, Adam state, step count)"
