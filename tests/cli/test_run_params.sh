#!/usr/bin/env bash
# tests/cli/test_run_params.sh — inference from a checkpoint without labels, as a user runs it:
# a classifier with a train block (its infer also computes the loss from the labels) is trained
# a few steps with `dlcc run --entry train_step --save-params`, then `dlcc run --params CKPT` with
# only x and --out probs runs compiled (cpu) and in the reference evaluator (ref). The two agree
# within a bound derived from float32 conditioning: the forward error of each dot product of
# length n is at most gamma(n) = n*u/(1 - n*u) times the dot product of the absolute values (u =
# 2^-24), propagated through ReLU (1-Lipschitz) and the second Gemm, and softmax turns a logit
# error of at most D into a relative error of at most 2*D in each probability, plus a few
# roundings of its own (exp, the sum, the division, the final rounding to float32). Also: the
# params really come from the checkpoint (the probabilities differ from the initial params'),
# a compiled artifact and --params, --init-params as the train step's alias, and the errors
# (a missing param, a mis-shaped param, a missing input an asked-for output needs).
# usage: test_run_params.sh DLCC
set -u
if [ $# -ne 1 ]; then
  echo "usage: test_run_params.sh DLCC" >&2
  exit 2
fi
prog=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
source "$(cd "$(dirname "$0")/../harness" && pwd)/cli_lib.sh"

cat >cls.dlg <<'EOF'
model tiny_cls
dim N = 16
input x : float[N, 8]
input y : int64[N]
param w1 : float[8, 32] = glorot_uniform(seed = 1)
param b1 : float[32] = zeros
param w2 : float[32, 3] = glorot_uniform(seed = 2)
param b2 : float[3] = zeros
h = Gemm (x, w1, b1)
a = Relu (h)
logits = Gemm (a, w2, b2)
probs = Softmax <axis = -1> (logits)
loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (logits, y)
output probs
output loss
train loss {
  optimizer = adam <lr = 0.05>
}
EOF
sed 's/32/4/g' cls.dlg >narrow.dlg
"$py" - <<'EOF'
import numpy as np
rng = np.random.default_rng(7)
np.save("x.npy", rng.standard_normal((16, 8)).astype(np.float32))
np.save("xs.npy", rng.standard_normal((4, 16, 8)).astype(np.float32))
np.save("ys.npy", rng.integers(0, 3, (4, 16)).astype(np.int64))
EOF

expect 0 "train 4 steps, save the params" run cls.dlg --entry train_step --steps 4 --in x=xs.npy \
  --in y=ys.npy --save-params ckpt.safetensors
check "the checkpoint exists" test -s ckpt.safetensors
expect 0 "--params, only x, compiled" run cls.dlg --params ckpt.safetensors --in x=x.npy --out probs=p_cpu.npy
expect 0 "--params, only x, reference evaluator" run cls.dlg --backend ref --params ckpt.safetensors \
  --in x=x.npy --out probs=p_ref.npy
expect 0 "the initial params, only x" run cls.dlg --backend ref --in x=x.npy --out probs=p_init.npy

check "compiled and reference agree within the float32 bound" "$py" - <<'EOF'
import json, struct, numpy as np
def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", v
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], np.float32).reshape(v["shape"]).astype(np.float64)
    return out
P = read_st("ckpt.safetensors")
x = np.load("x.npy").astype(np.float64)
u = 2.0 ** -24
g = lambda n: n * u / (1 - n * u)
h = x @ P["w1"] + P["b1"]
a = np.maximum(h, 0)
dh = g(x.shape[1] + 1) * (np.abs(x) @ np.abs(P["w1"]) + np.abs(P["b1"]))
dz = dh @ np.abs(P["w2"]) + g(a.shape[1] + 1) * (np.abs(a) @ np.abs(P["w2"]) + np.abs(P["b2"]))
z = a @ P["w2"] + P["b2"]
p = np.exp(z - z.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
k = z.shape[1]
# exp (8 ulp for a vectorised exp), the sum of k terms, the division, the final roundings.
tol = p * (2 * dz.max(1, keepdims=True) + (8 + k + 1 + 2) * u)
c, r = np.load("p_cpu.npy").astype(np.float64), np.load("p_ref.npy").astype(np.float64)
assert c.shape == r.shape == (16, 3), (c.shape, r.shape)
assert np.abs(r - p).max() <= 2 * u, ("the reference is the float64 forward pass", np.abs(r - p).max())
err = np.abs(c - r)
print("max |cpu - ref| = %.3g, max bound = %.3g, min bound = %.3g" % (err.max(), tol.max(), tol.min()))
assert np.all(err <= tol), (err / tol).max()
assert tol.max() < 1e-4, "the bound is meaningful"
EOF
check "the params came from the checkpoint" "$py" -c '
import numpy as np
assert np.abs(np.load("p_ref.npy") - np.load("p_init.npy")).max() > 1e-3'

expect 0 "without --out: probs printed" run cls.dlg --params ckpt.safetensors --in x=x.npy
check "... and a note names the loss and the labels" \
  grep -qF "note: output 'loss' is not computed: it needs input 'y', which was not given" "$err"
check "... the probs preview" grep -q '^probs: float\[16, 3\] = \[' "$out"
expect_msg 1 "--out loss without the labels names them" \
  "missing input 'y': output 'loss' needs it (expected int64[16]; give it with --in y=PATH.npy)" \
  run cls.dlg --params ckpt.safetensors --in x=x.npy --out loss=l.npy
check "... and writes nothing" test ! -e l.npy

# A compiled artifact computes all of its outputs: its infer reads the labels.
"$prog" compile cls.dlg -o cls.so >/dev/null 2>&1 || fail "compile cls.dlg"
expect_msg 1 "an artifact whose infer reads the labels needs them" \
  "missing input 'y': expected int64[16] (give it with --in y=PATH.npy)" \
  run cls.so --params ckpt.safetensors --in x=x.npy --out probs=pa.npy
"$py" -c 'import numpy as np; np.save("y.npy", np.zeros(16, np.int64))'
expect 0 "the artifact with --params and the labels" run cls.so --params ckpt.safetensors --in x=x.npy \
  --in y=y.npy --out probs=p_art.npy
check "the artifact's probs equal the .dlg run's" "$py" -c '
import numpy as np
assert np.abs(np.load("p_art.npy") - np.load("p_cpu.npy")).max() <= 1e-6'

# --init-params stays the train step's spelling; --params is the same there.
expect 0 "--params for --entry train_step" run cls.dlg --entry train_step --params ckpt.safetensors \
  --in x=xs.npy --in y=ys.npy --steps 1
expect 0 "--init-params for --entry infer" run cls.dlg --init-params ckpt.safetensors --in x=x.npy \
  --out probs=p_alias.npy
check "--init-params gives the same probs" cmp -s p_alias.npy p_cpu.npy

# Checkpoints that do not fit.
expect_msg 1 "a checkpoint of another shape" "param 'w1': the model has float[8, 4], the checkpoint float[8, 32]" \
  run narrow.dlg --params ckpt.safetensors --in x=x.npy --out probs=pn.npy
"$py" - <<'EOF'
import json, struct
with open("ckpt.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]; hdr = json.loads(f.read(n)); data = f.read()
keep = {k: v for k, v in hdr.items() if k != "b2" and k != "__metadata__"}
out, blobs, off = {}, [], 0
for k, v in keep.items():
    a, b = v["data_offsets"]; blobs.append(data[a:b])
    out[k] = dict(v, data_offsets=[off, off + b - a]); off += b - a
h = json.dumps(out).encode()
with open("no_b2.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h))); f.write(h); f.write(b"".join(blobs))
EOF
expect_msg 1 "a checkpoint without a param names it" "no_b2.safetensors: error: param 'b2'" \
  run cls.dlg --params no_b2.safetensors --in x=x.npy --out probs=pm.npy
expect_msg 1 "a missing checkpoint file" "param 'w1': cannot read" \
  run cls.dlg --params nothere.safetensors --in x=x.npy --out probs=pm.npy
expect 2 "--save-params still only applies to train_step" run cls.dlg --in x=x.npy --save-params o.st

finish
