#!/usr/bin/env bash
# tests/exec/test_cli.sh — threads and profiling in `dlcc run` and `dlcc train` (tools/dlcc.c):
# --threads errors, identical step lines at 1 and 2 threads, -v's mean step time, the
# --profile trace (parsed with Python's json: one tid per worker, kernel events with op names
# and .dlg lines, one step event per step), DLRT_PROFILE=FILE, --profile-summary's format, and
# DLRT_THREADS errors, --ftz. usage: test_cli.sh DLCC SOURCE_DIR
source "$(dirname "$0")/../train_cli/lib.sh"
mlp=$src/samples/mlp_fmnist.dlg

$py - <<'PYEOF' || { echo "FAIL cannot make the inputs with $py + numpy"; exit 1; }
import numpy as np
r = np.random.default_rng(1)
np.save("xs.npy", r.standard_normal((3, 16, 784)).astype(np.float32))
np.save("ys.npy", r.integers(0, 10, (3, 16)).astype(np.int64))
np.save("x.npy", r.standard_normal((16, 784)).astype(np.float32))
np.save("y.npy", r.integers(0, 10, 16).astype(np.int64))
PYEOF

run_args=(run "$mlp" -D N=16 --entry train_step --steps 3 --in x=xs.npy --in y=ys.npy)

for t in 0 -1 257 100000 abc ""; do
  expect_msg 2 "run --threads '$t' is a usage error" "--threads expects an integer 1..256, got '$t'" \
    "${run_args[@]}" --threads "$t"
done
expect_msg 2 "train --threads 0 is a usage error" "--threads expects an integer 1..256, got '0'" \
  train "$mlp" --dataset fashion-mnist --threads 0
expect_msg 2 "--profile needs a file name" "--profile needs a file name" "${run_args[@]}" --profile ""
expect_msg 2 "--threads with --backend ref" "--threads applies to compiled code" \
  run "$mlp" -D N=16 --in x=x.npy --in y=y.npy --backend ref --threads 2
DLRT_THREADS=abc expect_msg 1 "DLRT_THREADS=abc is an error naming the variable" \
  "DLRT_THREADS='abc': expected an integer 1..256" "${run_args[@]}"

expect 0 "train_step at 1 thread" "${run_args[@]}" --threads 1
cp "$out" t1.txt
expect 0 "train_step at 2 threads" "${run_args[@]}" --threads 2
check "1 and 2 threads print identical step lines" cmp -s t1.txt "$out"
DLRT_THREADS=2 expect 0 "train_step with DLRT_THREADS=2" "${run_args[@]}"
check "DLRT_THREADS=2 prints the same step lines" cmp -s t1.txt "$out"

expect 0 "-v prints the mean step time" "${run_args[@]}" --threads 2 -v
check "'dlcc: 3 steps, mean T ms per step (2 threads)'" \
  grep -qE '^dlcc: 3 steps, mean [0-9]+\.[0-9]{3} ms per step \(2 threads\)$' "$err"

expect 0 "--profile and --profile-summary" "${run_args[@]}" --threads 2 --profile trace.json \
  --profile-summary
check "the step lines are unchanged by profiling" cmp -s t1.txt "$out"
cp "$err" summary.txt
check "the trace parses: one tid per worker, named kernel events with lines, 3 steps" $py - <<'PYEOF'
import json, sys
t = json.load(open("trace.json"))
ev = t["traceEvents"]
ok = True
names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
if sorted(names) != [0, 1]:
    print("thread names:", names); ok = False
steps = [e for e in ev if e.get("cat") == "step"]
if len(steps) != 3 or any(e["name"] != "train_step" or e["dur"] < 0 for e in steps):
    print("steps:", steps); ok = False
ks = [e for e in ev if e.get("cat") == "kernel"]
if not ks or {e["tid"] for e in ks} - {0, 1}:
    print("kernel tids:", {e["tid"] for e in ks}); ok = False
ops = {o for e in ks for o in e["args"]["op"].split("+")}  # a fused kernel joins its ops with +
if any(e["args"]["ops"] != e["args"]["op"].split("+") for e in ks):
    print("ops lists:", {e["args"]["op"]: e["args"]["ops"] for e in ks}); ok = False
for want in ("Gemm", "Relu", "SoftmaxCrossEntropyLoss", "TrainStep"):
    if want not in ops:
        print("missing op", want, "in", sorted(ops)); ok = False
for e in ks:
    a = e["args"]
    if e["ph"] != "X" or e["name"] != a["op"] + " " + a["node"] or a["source"] != "mlp_fmnist.dlg":
        print("bad event", e); ok = False; break
    if not (0 <= a["begin"] < a["end"] <= a["range"]) or e["dur"] < 0:
        print("bad range", e); ok = False; break
# h = Gemm (x, w1, b1) (line 13) and a = Relu (h) are one fused kernel, named by its last
# node and located at its first
h = [e for e in ks if e["args"]["node"] == "a"]
if not h or any(e["args"]["line"] != 13 or e["args"]["op"] != "Gemm+Relu" for e in h):
    print("a events:", h[:2]); ok = False
if t["otherData"]["threads"] != 2:
    print("otherData:", t["otherData"]); ok = False
sys.exit(not ok)
PYEOF
check "--profile-summary: a header, then '  P%  T ms  OP NODE (mlp_fmnist.dlg:LINE)' lines" $py - <<'PYEOF'
import re, sys
lines = open("summary.txt").read().splitlines()
ok = bool(lines) and re.match(r"^profile: train_step, 3 steps, [0-9.]+ ms per step, 2 threads, "
                              r"kernel time [0-9.]+ ms per step \([0-9]+ kernels\)$", lines[0])
pat = re.compile(r"^ +([0-9]+\.[0-9])%  ([0-9]+\.[0-9]{3}) ms  ([A-Za-z+]+) (\S+)( \(mlp_fmnist\.dlg:[0-9]+\))?$")
body = lines[1:]
if len(body) != 10:
    ok = False
shares = []
for l in body:
    m = pat.match(l)
    if not m:
        print("bad line:", repr(l)); ok = False
    else:
        shares.append(float(m.group(1)))
if shares != sorted(shares, reverse=True) or sum(shares) > 100.5:
    print("shares:", shares); ok = False
if not ok:
    print("\n".join(lines))
sys.exit(not ok)
PYEOF

rm -f env.json
DLRT_PROFILE=env.json expect 0 "DLRT_PROFILE=FILE" "${run_args[@]}" --threads 1
check "DLRT_PROFILE wrote a trace with one worker row at session destroy" $py -c '
import json, sys
t = json.load(open("env.json"))
tids = {e["tid"] for e in t["traceEvents"] if e.get("cat") == "kernel"}
steps = [e for e in t["traceEvents"] if e.get("cat") == "step"]
sys.exit(not (tids == {0} and len(steps) == 3))'

expect 0 "run infer with --profile-summary" run "$mlp" -D N=16 --in x=x.npy --in y=y.npy \
  --threads 2 --profile-summary
check "the infer summary has its header" grep -qE '^profile: infer, 1 step, ' "$err"

# --ftz: a product that underflows prints as a denormal without it and as 0 with it, in run
# (infer, 2 threads) and in a train step (the flag reaches the session of both paths).
printf 'model denormal\ninput x : float[3]\ninput s : float[3]\ny = Mul (x, s)\noutput y\n' >den.dlg
$py -c 'import numpy as np
np.save("dx.npy", np.array([1e-20, 3e-20, 2.0], np.float32))
np.save("ds.npy", np.array([1e-20, 1e-20, 0.5], np.float32))'
expect 0 "run without --ftz" run den.dlg --in x=dx.npy --in s=ds.npy --threads 2 --out y=y0.npy
expect 0 "run --ftz" run den.dlg --in x=dx.npy --in s=ds.npy --threads 2 --ftz --out y=y1.npy
check "without --ftz the denormal product, with --ftz zero" $py -c '
import numpy as np, sys
a, b = np.load("y0.npy"), np.load("y1.npy")
sys.exit(not (a[0] == np.float32(1e-20) * np.float32(1e-20) and a[0] != 0 and a[2] == 1
              and list(b) == [0, 0, 1]))'
expect_msg 2 "--ftz with --backend ref" "--ftz applies to compiled code" \
  run den.dlg --in x=dx.npy --in s=ds.npy --backend ref --ftz
expect 0 "train_step with --ftz" "${run_args[@]}" --threads 2 --ftz
check "--ftz does not change these (normal-range) steps" cmp -s t1.txt "$out"

finish
