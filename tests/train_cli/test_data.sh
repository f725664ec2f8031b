#!/usr/bin/env bash
# tests/train_cli/test_data.sh — `dlcc train --data NAME=FILE` trains any model, not only
# classifiers: a masked linear regression (three inputs: features, a mask, float targets; MSE)
# whose loss falls and whose params match a NumPy reference of the same full-batch SGD steps;
# --normalize's statistics stored in the checkpoint and reapplied by --init (the test loss with
# and without them, against NumPy); a classifier by name (labels, accuracy and loss); bad
# inputs (a missing or unknown input, a wrong per-sample shape, sample counts that differ,
# float labels, labels outside the classes) exit 1 naming the file and the input and leave no
# checkpoint. usage: test_data.sh DLCC SOURCE_DIR
source "$(dirname "$0")/lib.sh"

cat >reg.dlg <<'DLG'
# pred = (x w + b) * m against float targets t (MSE): three inputs, one a mask.
model reg
dim N = 64

input  x : float[N, 3]
input  m : float[N, 1]
input  t : float[N, 1]

param  w : float[3, 1] = zeros
param  b : float[1]    = zeros

p      = Gemm (x, w, b)
pm     = Mul (p, m)
loss   = MeanSquaredError <reduction = "mean"> (pm, t)

output pm
output loss

train loss {
  optimizer = sgd <lr = 0.1>
}
DLG
$py - <<'PYEOF' || { echo "FAIL cannot make the data with $py + numpy"; exit 1; }
import numpy as np
r = np.random.default_rng(0)
X = (r.standard_normal((64, 3)) * [1, 5, 0.2] + [3, -1, 10]).astype(np.float32)
M = (r.random((64, 1)) > 0.2).astype(np.float32)
T = ((((X - X.mean(0)) / X.std(0)) @ [[0.5], [-1.0], [2.0]] + 0.3) * M).astype(np.float32)
np.save("x.npy", X); np.save("m.npy", M); np.save("t.npy", T)
TX = (r.standard_normal((128, 3)) * [1, 5, 0.2] + [3, -1, 10]).astype(np.float64)  # float64: converted
TM = (r.random((128, 1)) > 0.2).astype(np.uint8)                                  # uint8 mask
TT = ((((TX - X.mean(0)) / X.std(0)) @ [[0.5], [-1.0], [2.0]] + 0.3) * TM).astype(np.float32)
np.save("tx.npy", TX); np.save("tm.npy", TM); np.save("tt.npy", TT)
np.save("x4.npy", np.zeros((64, 4), np.float32))
np.save("m63.npy", M[:63])
np.save("ti.npy", np.zeros((64, 1), np.int64))
PYEOF
cat >"$work/st.py" <<'PYEOF'
# st.py FILE: prints a safetensors file's tensors and metadata as a Python dict literal.
import json, struct, sys
import numpy as np
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    out = {}
    for k, v in h.items():
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], {"F32": np.float32, "I64": np.int64}[v["dtype"]]).reshape(v["shape"])
    return out, meta
PYEOF
data=(--data x=x.npy --data m=m.npy --data t=t.npy)
test=(--test-data x=tx.npy --test-data m=tm.npy --test-data t=tt.npy)

# ---- regression: the loss falls and the params are those of NumPy's full-batch SGD steps
expect 0 "regression: 30 epochs of full-batch SGD by name, normalised" \
  train reg.dlg "${data[@]}" "${test[@]}" --normalize x --epochs 30 --threads 2 --save ck.safetensors
cp "$out" train.txt
cp "$err" train_err.txt
check "regression: the normalisation is printed (per channel, the training samples' values)" \
  grep -qE "^dlcc train: input 'x' normalised: per channel, mean \[2\.[0-9]+, -0\.[0-9]+, 10\.[0-9]+\] std \[.*\] \(of the 64 training samples\)$" train_err.txt
check "regression: a test loss line" grep -qE "^test loss: [0-9.e+-]+ \(mean over 128 samples\)$" train.txt
check "regression: no accuracy (not a classifier)" test "$(grep -c accuracy train.txt)" -eq 0
if $py - <<'PYEOF'; then pass "regression: loss falls, params = NumPy SGD, stats stored"; else fail "regression: loss falls, params = NumPy SGD, stats stored"; fi
import sys
import numpy as np
exec(open("st.py").read())
losses = [float(l.split()[4].rstrip(",")) for l in open("train.txt") if l.startswith("epoch ")]
ok = len(losses) == 30 and losses[-1] < 1e-3 * losses[0] and all(b <= a for a, b in zip(losses, losses[1:]))
X = np.load("x.npy").astype(np.float64); M = np.load("m.npy").astype(np.float64); T = np.load("t.npy").astype(np.float64)
mean, std = X.mean(0), X.std(0)
Xn = (X - mean) / std
w = np.zeros((3, 1)); b = np.zeros(1)
ref = []
for step in range(30):
    pm = (Xn @ w + b) * M
    ref.append(((pm - T) ** 2).mean())
    g = 2 * (pm - T) * M / len(T)
    w -= 0.1 * Xn.T @ g
    b -= 0.1 * g.sum(0)
p, meta = load("ck.safetensors")
for name, want in (("w", w), ("b", b)):
    if not np.allclose(p[name].reshape(want.shape), want, rtol=1e-4, atol=1e-6):
        print(name, p[name].ravel(), "numpy", want.ravel()); ok = False
if not np.allclose(losses, ref, rtol=1e-3, atol=1e-9):
    print("losses", losses[:5], "numpy", ref[:5]); ok = False
v = meta.get("dlcc.normalize.x", "")
st_mean = [float(x) for x in v.split("mean=")[1].split()[0].split(",")]
st_std = [float(x) for x in v.split("std=")[1].split()[0].split(",")]
if not (v.startswith("per-channel ") and np.allclose(st_mean, mean, rtol=1e-6) and np.allclose(st_std, std, rtol=1e-6)):
    print("metadata", v, "numpy", mean, std); ok = False
sys.exit(not ok)
PYEOF

# ---- the stored normalisation is reapplied by --init (lr 0: the params stay), and
# --normalize none evaluates the raw values: both test losses against NumPy.
expect 0 "--init reapplies the checkpoint's normalisation" \
  train reg.dlg "${data[@]}" "${test[@]}" --init ck.safetensors --lr 0 --epochs 1
cp "$out" with.txt
check "--init: the normalisation comes from the checkpoint" \
  grep -qE "^dlcc train: input 'x' normalised: per channel, .* \(stored in ck\.safetensors\)$" "$err"
expect 0 "--normalize none: the raw values" \
  train reg.dlg "${data[@]}" "${test[@]}" --init ck.safetensors --lr 0 --epochs 1 --normalize none
cp "$out" without.txt
check "--normalize none: no normalisation line" test "$(grep -c normalised "$err")" -eq 0
if $py - <<'PYEOF'; then pass "test losses with and without the stored statistics = NumPy's"; else fail "test losses with and without the stored statistics = NumPy's"; fi
import sys
import numpy as np
exec(open("st.py").read())
p, meta = load("ck.safetensors")
v = meta["dlcc.normalize.x"]
mean = np.array([float(x) for x in v.split("mean=")[1].split()[0].split(",")], np.float32)
std = np.array([float(x) for x in v.split("std=")[1].split()[0].split(",")], np.float32)
TX = np.load("tx.npy").astype(np.float32); TM = np.load("tm.npy").astype(np.float32); TT = np.load("tt.npy")
def loss(x):
    pm = (x.astype(np.float64) @ p["w"].astype(np.float64) + p["b"]) * TM
    return ((pm - TT) ** 2).mean()
got = lambda f: float([l for l in open(f) if l.startswith("test loss:")][0].split()[2])
want_with, want_without = loss((TX - mean) / std), loss(TX)
ok = abs(got("with.txt") - want_with) <= 1e-4 * want_with + 1e-7
ok = ok and abs(got("without.txt") - want_without) <= 1e-4 * want_without
ok = ok and want_without > 100 * want_with
if not ok:
    print("with", got("with.txt"), want_with, "without", got("without.txt"), want_without)
sys.exit(not ok)
PYEOF

# ---- `dlcc run --params CKPT` reapplies the stored normalisation too (a notice on stderr;
# --normalize none skips it): the prediction pm of the first 64 test samples against NumPy.
$py -c "
import numpy as np
np.save('rx.npy', np.load('tx.npy')[:64].astype(np.float32))
np.save('rm.npy', np.load('tm.npy')[:64].astype(np.float32))"
expect 0 "run --params: inference with the checkpoint's normalisation" \
  run reg.dlg --params ck.safetensors --in x=rx.npy --in m=rm.npy --out pm=pm_with.npy
check "run --params: the notice names the input, the values and how to turn it off" \
  grep -qE "^dlcc run: input 'x' normalised: per channel, mean \[.*\] std \[.*\] \(stored in ck\.safetensors\); --normalize none turns it off$" "$err"
expect 0 "run --params --normalize none: the raw values" \
  run reg.dlg --params ck.safetensors --normalize none --in x=rx.npy --in m=rm.npy --out pm=pm_raw.npy
check "run --normalize none: no notice" test "$(grep -c normalised "$err")" -eq 0
expect 0 "run --params --backend ref normalises as well" \
  run reg.dlg --backend ref --params ck.safetensors --in x=rx.npy --in m=rm.npy --out pm=pm_ref.npy
check "run: the predictions with and without the statistics are NumPy's" $py - <<'PYEOF'
import sys
import numpy as np
exec(open("st.py").read())
p, meta = load("ck.safetensors")
v = meta["dlcc.normalize.x"]
mean = np.array([float(x) for x in v.split("mean=")[1].split()[0].split(",")], np.float32)
std = np.array([float(x) for x in v.split("std=")[1].split()[0].split(",")], np.float32)
X, M = np.load("rx.npy"), np.load("rm.npy")
pred = lambda x: (x.astype(np.float64) @ p["w"] + p["b"]) * M
ok = True
for f, x in (("pm_with.npy", (X - mean) / std), ("pm_ref.npy", (X - mean) / std), ("pm_raw.npy", X)):
    if not np.allclose(np.load(f), pred(x), rtol=1e-5, atol=1e-5):
        print(f, np.load(f)[:3].ravel(), pred(x)[:3].ravel()); ok = False
sys.exit(not ok)
PYEOF
expect_msg 2 "run --normalize takes only none" "--normalize expects 'none'" \
  run reg.dlg --params ck.safetensors --normalize x --in x=rx.npy --in m=rm.npy
expect_msg 2 "run --normalize none without --params" "--normalize none only applies with --params" \
  run reg.dlg --normalize none --in x=rx.npy --in m=rm.npy

# ---- a classifier by name: the MLP sample's x and y, the accuracy and the loss
cp "$src/samples/mlp_fmnist.dlg" mlp.dlg
$py -c "
import numpy as np
r = np.random.default_rng(1)
np.save('cx.npy', r.standard_normal((256, 784)).astype(np.float32))
np.save('cy.npy', r.integers(0, 10, 256).astype(np.int32))
np.save('cyf.npy', r.integers(0, 10, 256).astype(np.float32))
y = r.integers(0, 10, 256); y[5] = 12
np.save('cybig.npy', y)
np.save('ctx.npy', r.standard_normal((100, 784)).astype(np.float32))
np.save('cty.npy', r.integers(0, 10, 100).astype(np.int64))
"
expect 0 "classifier by name (int32 labels into an int64 input)" \
  train mlp.dlg --data x=cx.npy --data y=cy.npy --test-data x=ctx.npy --test-data y=cty.npy --batch 32 --threads 2
check "classifier: test accuracy over the 100 test samples" grep -qE "^test accuracy: 0\.[0-9]{4} \([0-9]+/100\)$" "$out"
check "classifier: test loss over the full batches" \
  grep -qE "^test loss: [0-9.]+ \(mean over 96 samples in full batches; the 4 in the padded last batch are left out\)$" "$out"
check "classifier: no normalisation unless asked" test "$(grep -c normalised "$err")" -eq 0

# ---- bad inputs: exit 1, the file and the input named, no checkpoint
bad() { # bad NAME TEXT ARGS...
  local name=$1 text=$2
  shift 2
  rm -f bad.safetensors
  expect_msg 1 "$name" "$text" train "$@" --save bad.safetensors
  check "$name: no checkpoint" test ! -e bad.safetensors
}
bad "missing input" "reg.dlg: error: input 't' (float[N, 1]) has no data: give it with --data t=FILE.npy" \
  reg.dlg --data x=x.npy --data m=m.npy
bad "unknown input" "--data z=x.npy: model 'reg' has no input 'z' (its inputs: x, m, t)" \
  reg.dlg "${data[@]}" --data z=x.npy
bad "wrong per-sample shape" "x4.npy (input 'x'): samples of [4] (4 values), expected [3] (3 values) per sample" \
  reg.dlg --data x=x4.npy --data m=m.npy --data t=t.npy
bad "sample counts differ" "m63.npy (input 'm') holds 63 samples, x.npy (input 'x') 64: every array needs one row per sample" \
  reg.dlg --data x=x.npy --data m=m63.npy --data t=t.npy
bad "a test input missing" "input 'm' has no test data: give it with --test-data m=FILE.npy" \
  reg.dlg "${data[@]}" --test-data x=tx.npy --test-data t=tt.npy
bad "a file that is not there" "nope.npy: cannot read the array of input 't'" \
  reg.dlg --data x=x.npy --data m=m.npy --data t=nope.npy
bad "float labels" "cyf.npy (input 'y'): float32 values for an int64 input: expected an integer dtype" \
  mlp.dlg --data x=cx.npy --data y=cyf.npy --batch 32
bad "labels outside the classes" "cybig.npy (input 'y'): value 12 of sample 5 is outside [0, 10) (the model's classes)" \
  mlp.dlg --data x=cx.npy --data y=cybig.npy --batch 32
bad "--normalize an integer input" "--normalize y: input 'y' is int64[N]: only a float input is normalised" \
  mlp.dlg --data x=cx.npy --data y=cy.npy --batch 32 --normalize y
expect_msg 2 "--data and --dataset exclude each other" "--dataset and --data exclude each other" \
  train reg.dlg "${data[@]}" --dataset npy:x.npy,t.npy
expect_msg 2 "--data without NAME=" "--data expects NAME=FILE (a model input and its .npy file), got 'x.npy'" \
  train reg.dlg --data x.npy
expect_msg 2 "--normalize with a bad mode" "--normalize expects NAME, NAME=per-channel, NAME=global or none, got 'x=minmax'" \
  train reg.dlg "${data[@]}" --normalize x=minmax
finish
