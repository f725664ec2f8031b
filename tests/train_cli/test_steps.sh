#!/usr/bin/env bash
# tests/train_cli/test_steps.sh — `dlcc run --entry train_step` end to end on the MLP sample
# (-D N=8): one line per step with finite values, a [K, ...] input that gives one batch per step,
# a checkpoint written with --save-params that Python reads back as safetensors (params and
# Adam's slots with the right shapes, the step count in the metadata), and --init-params from
# it. Needs the training runtime (dlrt_session_train_step). usage: test_steps.sh DLCC SOURCE_DIR
source "$(dirname "$0")/lib.sh"
mlp=$src/samples/mlp_fmnist.dlg

$py - <<'PYEOF' || { echo "FAIL cannot make the inputs with $py + numpy"; exit 1; }
import numpy as np
r = np.random.default_rng(1)
np.save("xs.npy", r.standard_normal((3, 8, 784)).astype(np.float32))
np.save("ys.npy", r.integers(0, 10, (3, 8)).astype(np.int64))
np.save("y.npy", r.integers(0, 10, 8).astype(np.int64))
PYEOF

# step_lines FILE K: exactly K lines "step i loss L grad_norm G skipped 0|1", i = 1..K, finite.
step_lines() {
  $py - "$1" "$2" <<'PYEOF'
import math, re, sys
lines = open(sys.argv[1]).read().splitlines()
k = int(sys.argv[2])
pat = re.compile(r"^step (\d+) loss (\S+) grad_norm (\S+) skipped ([01])$")
ok = len(lines) == k
for i, l in enumerate(lines):
    m = pat.match(l)
    if not m or int(m.group(1)) != i + 1 or not all(math.isfinite(float(m.group(j))) for j in (2, 3)):
        print("bad line:", l); ok = False
sys.exit(not ok)
PYEOF
}

expect 0 "run --entry train_step --steps 3" run "$mlp" -D N=8 --entry train_step --steps 3 \
  --in x=xs.npy --in y=ys.npy --save-params ck.safetensors
check "three step lines with finite loss and grad norm" step_lines "$out" 3
cp "$out" first.txt
check "the first loss is near ln(10) (random init, 10 classes)" \
  $py -c "import sys; l=float(open('first.txt').readline().split()[3]); sys.exit(not 1.5 < l < 4.0)"
check "--save-params wrote a safetensors checkpoint Python reads back" $py - <<'PYEOF'
import json, struct, sys
import numpy as np
b = open("ck.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
meta = h.pop("__metadata__", {})
want = {"w1": [784, 256], "b1": [256], "w2": [256, 10], "b2": [10]}
ok = True
for name, shape in want.items():
    for t in (name, name + ".exp_avg", name + ".exp_avg_sq"):
        if t not in h or h[t]["shape"] != shape or h[t]["dtype"] != "F32":
            print("missing or wrong:", t, h.get(t)); ok = False
            continue
        s, e = h[t]["data_offsets"]
        a = np.frombuffer(b[8 + n + s:8 + n + e], dtype="<f4")
        if not np.all(np.isfinite(a)):
            print("non-finite values in", t); ok = False
if meta.get("dlcc.step") != "3":
    print("metadata:", meta); ok = False
sys.exit(not ok)
PYEOF

expect 0 "the same batch every step (input of the exact shape)" run "$mlp" -D N=8 --entry train_step \
  --steps 2 --in x=xs.npy --in y=y.npy
check "two step lines" step_lines "$out" 2

expect 0 "--init-params from the checkpoint" run "$mlp" -D N=8 --entry train_step --steps 1 \
  --in x=xs.npy --in y=ys.npy --init-params ck.safetensors
check "one step line" step_lines "$out" 1
check "training from the checkpoint starts below the first loss" \
  $py -c "import sys; a=float(open('first.txt').readline().split()[3]); b=float(open('$out').readline().split()[3]); sys.exit(not b < a)"

expect_msg 1 "--init-params from a missing file" "missing.safetensors" run "$mlp" -D N=8 \
  --entry train_step --in x=xs.npy --in y=ys.npy --init-params missing.safetensors
check "a failed run prints no step line" test ! -s "$out"
rm -f ck.safetensors
expect 1 "a failed --init-params writes no --save-params file" run "$mlp" -D N=8 --entry train_step \
  --in x=xs.npy --in y=ys.npy --init-params missing.safetensors --save-params ck.safetensors
check "... no checkpoint" test ! -e ck.safetensors

# A checkpoint resumes bit-identically in another process: 1 step, save, then 2 steps from the
# checkpoint in a new process give exactly the params and Adam state of 3 uninterrupted steps.
$py -c "import numpy as np; x=np.load('xs.npy'); y=np.load('ys.npy'); np.save('x0.npy', x[:1]); np.save('y0.npy', y[:1]); np.save('x12.npy', x[1:]); np.save('y12.npy', y[1:])"
expect 0 "3 uninterrupted steps" run "$mlp" -D N=8 --entry train_step --steps 3 \
  --in x=xs.npy --in y=ys.npy --save-params full.safetensors
expect 0 "1 step, then save" run "$mlp" -D N=8 --entry train_step --steps 1 \
  --in x=x0.npy --in y=y0.npy --save-params part1.safetensors
expect 0 "2 more steps from the checkpoint in another process" run "$mlp" -D N=8 \
  --entry train_step --steps 2 --in x=x12.npy --in y=y12.npy --init-params part1.safetensors \
  --save-params part2.safetensors
check "the resumed run's params, slots and step equal the uninterrupted run's, bit for bit" $py - <<'PYEOF'
import json, struct, sys
def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}, meta
a, ma = read("full.safetensors")
b, mb = read("part2.safetensors")
bad = [k for k in a if a[k] != b.get(k)]
if bad or set(a) != set(b) or ma.get("dlcc.step") != mb.get("dlcc.step") or ma.get("dlcc.step") != "3":
    print("differ:", bad, ma, mb); sys.exit(1)
PYEOF

# A compiled artifact runs its train step too.
expect 0 "compile the MLP" compile "$mlp" -D N=8 -o mlp8.so
expect 0 "run --entry train_step on the artifact" run mlp8.so --entry train_step --steps 3 \
  --in x=xs.npy --in y=ys.npy
check "the artifact gives the same three lines" cmp -s "$out" first.txt
finish
