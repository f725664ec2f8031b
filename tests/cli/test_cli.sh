#!/usr/bin/env bash
# tests/cli/test_cli.sh — end-to-end tests of the dlcc command line: exit codes (0 ok, 1 invalid
# input, 2 bad usage), check/fmt on the samples, `dlcc run` against NumPy, input validation
# messages, and "a failed command writes nothing". usage: test_cli.sh DLCC SOURCE_DIR
#
# Inputs are made with /usr/bin/python3 + numpy (the python3 on PATH may lack numpy). Every case
# prints "ok" or "FAIL" with the command's stderr; the last line is "N passed, N failed".
set -u
if [ $# -ne 2 ]; then
  echo "usage: test_cli.sh DLCC SOURCE_DIR" >&2
  exit 2
fi
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
prog=$dlcc
src=$(cd "$2" && pwd)
source "$src/tests/harness/cli_lib.sh"

# run_dlcc ARGS...: runs dlcc, capturing stdout/stderr; sets $rc.
# `dlcc run` without --backend runs on DL_CLI_BACKEND (default ref; ctest also registers a run of
# this script with the cpu backend).
run_dlcc() {
  if [ "${1:-}" = run ] && [[ " $* " != *" --backend"* ]]; then
    "$dlcc" run --backend "${DL_CLI_BACKEND:-ref}" "${@:2}" >"$out" 2>"$err"
  else
    "$dlcc" "$@" >"$out" 2>"$err"
  fi
  rc=$?
}

# ---------------------------------------------------------------------------------------------
# Usage, help, version

expect 2 "no arguments is a usage error"
expect 0 "--help" --help
check "--help prints the commands on stdout" grep -qF "usage: dlcc COMMAND" "$out"
run_dlcc --version
check "--version prints the version" grep -qE '^dlcc [0-9]+\.[0-9]+\.[0-9]+ \(' "$out"
expect 0 "help run" help run
check "help run shows run's usage" grep -qF "usage: dlcc run FILE" "$out"
expect 0 "run --help" run --help
check "run --help shows run's usage" grep -qF -- "--in NAME=PATH" "$out"
expect 0 "check -h" check -h
expect_msg 2 "help for an unknown command" "unknown command 'frobnicate'" help frobnicate
expect_msg 2 "unknown command" "dlcc: error: unknown command 'frobnicate'" frobnicate
expect_msg 2 "unknown global option" "unknown option '--frob'" --frob
expect_msg 2 "unknown flag" "dlcc check: error: unknown flag '--bogus'" check --bogus "$src/samples/mlp_fmnist.dlg"
expect_msg 2 "check without files" "no input files" check
expect_msg 2 "-D without '='" "-D expects NAME=INT, got 'N'" run -D N "$src/samples/mlp_fmnist.dlg"
expect_msg 2 "-D with a non-integer" "-D N: '12x' is not an integer" run -D N=12x "$src/samples/mlp_fmnist.dlg"
expect_msg 2 "-D with nothing after it" "-D needs an argument" run "$src/samples/mlp_fmnist.dlg" -D
expect_msg 2 "--in without '='" "--in expects NAME=PATH.npy, got 'x.npy'" run --in x.npy "$src/samples/mlp_fmnist.dlg"
expect_msg 2 "--in twice for one input" "input 'x' is given twice (a.npy and b.npy)" run --in x=a.npy --in x=b.npy "$src/samples/mlp_fmnist.dlg"
expect_msg 2 "--backend cuda" "backend 'cuda' is not available yet in this build (available: cpu, ref)" run --backend cuda "$src/samples/mlp_fmnist.dlg"
expect_msg 2 "--backend unknown" "unknown backend 'tpu'" run --backend=tpu "$src/samples/mlp_fmnist.dlg"
expect_msg 2 "--steps without --entry train_step" "--steps only applies to --entry train_step" run --steps 3 "$src/samples/mlp_fmnist.dlg"
expect_msg 2 "run without a model" "no model file" run
expect_msg 2 "fmt of two files without --check" "one file at a time" fmt a.dlg b.dlg
expect_msg 2 "import without a model" "no ONNX model file" import

# ---------------------------------------------------------------------------------------------
# dlcc check

expect_msg 1 "missing file" "nope.dlg" check nope.dlg
for s in "$src"/samples/*.dlg; do
  run_dlcc check "$s"
  check "check $(basename "$s") is quiet and succeeds" test "$rc" -eq 0 -a ! -s "$out" -a ! -s "$err"
done
run_dlcc check -v "$src"/samples/mlp_fmnist.dlg
check "check -v reports nodes, params and the train step" grep -qE "mlp_fmnist.dlg: ok \(5 nodes, 4 params; train step: [0-9]+ backward nodes\)" "$out"

cat >bad.dlg <<'EOF'
model bad
input x : float[2, 3]
param w : float[4, 5] = zeros
y = MatMul (x, w)
output y
EOF
expect_msg 1 "bad model" "bad.dlg:4:5: error: MatMul 'y'" check bad.dlg
# Paths in diagnostics are the paths as given.
mkdir -p sub
cp bad.dlg sub/bad.dlg
expect_msg 1 "paths as given" "sub/../sub/bad.dlg:4:5:" check sub/../sub/bad.dlg
# Several files: all are checked, exit 1 if any is bad.
run_dlcc check bad.dlg "$src/samples/mlp_fmnist.dlg" sub/bad.dlg
check "check of several files reports each" test "$rc" -eq 1 -a "$(grep -c 'error: MatMul' "$err")" -eq 2

# ---------------------------------------------------------------------------------------------
# dlcc fmt

for s in "$src"/samples/*.dlg; do
  b=$(basename "$s" .dlg)
  run_dlcc fmt "$s"
  cp "$out" "$b.1.dlg"
  run_dlcc fmt "$b.1.dlg"
  check "fmt $b is idempotent" cmp -s "$b.1.dlg" "$out"
  expect 0 "fmt --check $b (formatted)" fmt --check "$b.1.dlg"
  expect 0 "check of formatted $b" check "$b.1.dlg"
done
printf 'model   messy\ninput x:float[2]\ny=Relu(x)\noutput y\n' >messy.dlg
expect 1 "fmt --check on an unformatted file" fmt --check messy.dlg mlp_fmnist.1.dlg
check "fmt --check lists only the unformatted file" test "$(cat "$out")" = "messy.dlg"
expect 0 "fmt -o in place" fmt messy.dlg -o messy.dlg
expect 0 "fmt --check after fmt -o" fmt --check messy.dlg
echo "keep me" >keep.dlg
expect 1 "fmt of a bad file" fmt bad_syntax_missing.dlg -o keep.dlg
printf 'model broken\ninput x : float[2]\ny = Relu x)\n' >broken.dlg
expect_msg 1 "fmt of a file with errors" "broken.dlg:3:" fmt broken.dlg -o keep.dlg
check "fmt of a bad file leaves OUT untouched" test "$(cat keep.dlg)" = "keep me"
check "fmt of a bad file prints nothing on stdout" test ! -s "$out"

# ---------------------------------------------------------------------------------------------
# dlcc run: a numeric check against NumPy on a model with literal params

if ! "$py" -c 'import numpy' 2>/dev/null; then
  echo "FAIL numpy is not available to $py"
  echo "$passed passed, $((failed + 1)) failed"
  exit 1
fi

"$py" - <<'EOF'
import numpy as np
rng = np.random.default_rng(1234)
w1 = rng.uniform(-1, 1, (5, 4)); b1 = rng.uniform(-1, 1, 4)
w2 = rng.uniform(-1, 1, (4, 3)); b2 = rng.uniform(-1, 1, 3)
def lit(a):
    if a.ndim == 1:
        return "[" + ", ".join(repr(float(v)) for v in a) + "]"
    return "[" + ", ".join(lit(r) for r in a) + "]"
with open("tiny.dlg", "w") as f:
    f.write(f"""model tiny
dim N = 6
input x : float[N, 5]
param w1 : float[5, 4] = {lit(w1)}
param b1 : float[4] = {lit(b1)}
param w2 : float[4, 3] = {lit(w2)}
param b2 : float[3] = {lit(b2)}
h = Gemm (x, w1, b1)
a = Relu (h)
logits = Gemm (a, w2, b2)
probs = Softmax <axis = -1> (logits)
output probs
output a
""")
x = rng.standard_normal((6, 5)).astype(np.float32)
np.save("tx.npy", x)
np.save("tx3.npy", x[:3].copy())
# The model's params are float32, so round them as the compiler does before computing in float64.
f = lambda t: t.astype(np.float32).astype(np.float64)
a = np.maximum(x.astype(np.float64) @ f(w1) + f(b1), 0)
lg = a @ f(w2) + f(b2)
e = np.exp(lg - lg.max(axis=1, keepdims=True))
np.save("want_probs.npy", e / e.sum(axis=1, keepdims=True))
np.save("want_a.npy", a)
EOF

cmp_npy() { # cmp_npy GOT WANT [ROWS]: float32 GOT ~= WANT (first ROWS rows of WANT)
  "$py" - "$@" <<'EOF'
import sys, numpy as np
got = np.load(sys.argv[1]); want = np.load(sys.argv[2])
if len(sys.argv) > 3:
    want = want[: int(sys.argv[3])]
ok = got.dtype == np.float32 and got.shape == want.shape and \
     np.allclose(got, want, rtol=1e-4, atol=1e-5)
if not ok:
    print(f"  got {got.dtype}{list(got.shape)}, want {want.shape}; max err",
          float(np.max(np.abs(got - want))) if got.shape == want.shape else "n/a")
sys.exit(0 if ok else 1)
EOF
}

expect 0 "run tiny with --out" run tiny.dlg --in x=tx.npy --out probs=probs.npy --out a=a.npy
check "tiny probs match NumPy" cmp_npy probs.npy want_probs.npy
check "tiny relu output matches NumPy" cmp_npy a.npy want_a.npy
check "run with --out prints nothing on stdout" test ! -s "$out"
expect 0 "run tiny with -D N=3" run tiny.dlg -D N=3 --in x=tx3.npy --out probs=probs3.npy
check "tiny -D N=3 probs match NumPy" cmp_npy probs3.npy want_probs.npy 3
expect_msg 1 "-D N=3 with the N=6 input" "input 'x': expected float[3, 5], got float[6, 5] (from tx.npy)" run tiny.dlg -D N=3 --in x=tx.npy
expect_msg 1 "-D for an unknown dim" "model 'tiny' has no dim named 'M' (dims: N)" run tiny.dlg -D M=3 --in x=tx.npy
expect_msg 1 "-D with a value below 1" "a dim must be at least 1" run tiny.dlg -D N=0 --in x=tx.npy
expect 0 "run tiny without --out" run tiny.dlg --in x=tx.npy
check "preview lists each output with its type" grep -qE '^probs: float\[6, 3\] = \[.*\.\.\. \(18 values\)\]$' "$out"
check "preview lists the second output" grep -qE '^a: float\[6, 4\] = \[' "$out"

# ---------------------------------------------------------------------------------------------
# dlcc run on the Fashion-MNIST sample: shapes, dtypes, probabilities sum to 1

"$py" - <<'EOF'
import numpy as np
rng = np.random.default_rng(7)
np.save("x.npy", rng.standard_normal((128, 784)).astype(np.float32))
np.save("y.npy", rng.integers(0, 10, 128).astype(np.int64))
np.save("x_short.npy", rng.standard_normal((64, 784)).astype(np.float32))
np.save("x_f64.npy", rng.standard_normal((128, 784)))
np.save("y_i32.npy", rng.integers(0, 10, 128).astype(np.int32))
np.save("x_fortran.npy", np.asfortranarray(rng.standard_normal((128, 784)).astype(np.float32)))
np.save("x_be.npy", rng.standard_normal((128, 784)).astype(">f4"))
np.save("x4.npy", rng.standard_normal((4, 784)).astype(np.float32))
np.save("y4.npy", rng.integers(0, 10, 4).astype(np.int64))
with open("x_v2.npy", "wb") as f:  # format version 2.0, as numpy writes huge headers
    np.lib.format.write_array(f, rng.standard_normal((128, 784)).astype(np.float32), version=(2, 0))
data = open("x.npy", "rb").read()
open("x_trunc.npy", "wb").write(data[:-100])
EOF
mlp=$src/samples/mlp_fmnist.dlg

expect 0 "run mlp_fmnist" run "$mlp" --in x=x.npy --in y=y.npy --out probs=probs.npy --out loss=loss.npy
check "mlp probs: float32 [128, 10], rows sum to 1; loss: finite float32 scalar" "$py" -c '
import numpy as np
p = np.load("probs.npy"); l = np.load("loss.npy")
assert p.dtype == np.float32 and p.shape == (128, 10), (p.dtype, p.shape)
assert np.all(p >= 0) and np.allclose(p.sum(axis=1), 1, atol=1e-5)
assert l.dtype == np.float32 and l.shape == () and np.isfinite(l) and l > 0, (l.dtype, l.shape, l)
'
expect 0 "run mlp_fmnist with a version 2.0 .npy" run "$mlp" --in x=x_v2.npy --in y=y.npy
expect 0 "run mlp_fmnist with -D N=4" run "$mlp" -D N=4 --in=x=x4.npy --in y=y4.npy --out=probs=p4.npy
check "-D N=4 gives [4, 10] probs" "$py" -c 'import numpy as np; assert np.load("p4.npy").shape == (4, 10)'

# infer needs only what the outputs asked for depend on: the labels only for the loss.
expect_msg 1 "missing input an asked-for output needs" "missing input 'y': output 'loss' needs it (expected int64[128]; give it with --in y=PATH.npy)" run "$mlp" --in x=x.npy --out probs=pp.npy --out loss=pl.npy
check "nothing is written when an asked-for output cannot be computed" test ! -e pp.npy
expect_msg 0 "without --out: the outputs whose inputs were given" "note: output 'loss' is not computed: it needs input 'y', which was not given" run "$mlp" --in x=x.npy
check "... are printed" grep -q '^probs: float\[128, 10\] = \[' "$out"
expect 0 "--out probs without the labels" run "$mlp" --in x=x.npy --out probs=px.npy
expect 0 "--out probs with the labels" run "$mlp" --in x=x.npy --in y=y.npy --out probs=pxy.npy
check "probs without the labels equal probs with them" "$py" -c 'import numpy as np; a=np.load("px.npy"); b=np.load("pxy.npy"); assert a.shape == (128, 10) and np.allclose(a, b, rtol=0, atol=1e-6), abs(a-b).max()'
expect_msg 1 "no output computable: every needed input is named" "missing input 'x': expected float[128, 784] (give it with --in x=PATH.npy)" run "$mlp" --in y=y.npy
expect_msg 1 "extra input" "--in z: model 'mlp_fmnist' has no input named 'z' (inputs: x, y)" run "$mlp" --in x=x.npy --in y=y.npy --in z=x.npy
expect_msg 1 "mis-shaped input" "input 'x': expected float[128, 784], got float[64, 784] (from x_short.npy)" run "$mlp" --in x=x_short.npy --in y=y.npy
expect_msg 1 "mis-typed input" "input 'y': expected int64[128], got int32[128] (from y_i32.npy)" run "$mlp" --in x=x.npy --in y=y_i32.npy
expect_msg 1 "float64 .npy" "x_f64.npy: error: unsupported dtype '<f8' (supported: '<f4' float" run "$mlp" --in x=x_f64.npy --in y=y.npy
expect_msg 1 "Fortran-order .npy" "x_fortran.npy: error: Fortran-order arrays are not supported" run "$mlp" --in x=x_fortran.npy --in y=y.npy
expect_msg 1 "big-endian .npy" "x_be.npy: error: big-endian dtype '>f4' is not supported" run "$mlp" --in x=x_be.npy --in y=y.npy
expect_msg 1 "truncated .npy" "x_trunc.npy: error: truncated data: expected 401408 bytes, got 401308" run "$mlp" --in x=x_trunc.npy --in y=y.npy
expect_msg 1 "missing .npy" "nothere.npy: error: cannot read: No such file or directory" run "$mlp" --in x=nothere.npy --in y=y.npy
echo "not numpy" >junk.npy
expect_msg 1 "not a .npy file" "junk.npy: error: not a .npy file (bad magic)" run "$mlp" --in x=junk.npy --in y=y.npy
expect_msg 1 "unknown output" "--out logits: model 'mlp_fmnist' has no output named 'logits' (outputs: probs, loss)" run "$mlp" --in x=x.npy --in y=y.npy --out logits=l.npy
expect_msg 1 "run of a bad model" "bad.dlg:4:5: error" run bad.dlg --in x=x.npy

# ---------------------------------------------------------------------------------------------
# No partial output: a failed run creates nothing and leaves existing files alone

rm -f new_probs.npy
echo "precious" >old_probs.npy
cp old_probs.npy old_probs.ref
for bad in "--in x=x_short.npy --in y=y.npy" "--in x=x.npy" "--in x=x.npy --in y=y.npy --out nope=n.npy"; do
  # shellcheck disable=SC2086
  run_dlcc run "$mlp" $bad --out probs=new_probs.npy --out loss=old_probs.npy
  check "failed run ($bad) exits 1" test "$rc" -eq 1
  check "failed run ($bad) creates no output" test ! -e new_probs.npy
  check "failed run ($bad) leaves the existing output untouched" cmp -s old_probs.npy old_probs.ref
done
# An output that cannot be written: nothing else is written either.
run_dlcc run "$mlp" --in x=x.npy --in y=y.npy --out probs=new_probs.npy --out loss=no/such/dir/loss.npy
check "unwritable output exits 1" test "$rc" -eq 1
check "unwritable output names the path" grep -qF "no/such/dir/loss.npy: error: cannot write" "$err"
check "unwritable output writes no other output" test ! -e new_probs.npy
check "no temporary files are left behind" test -z "$(find . -name '*.tmp*')"

# ---------------------------------------------------------------------------------------------
# dlcc import

if "$py" -c 'import onnx' 2>/dev/null; then
  "$py" - <<'EOF'
import onnx, numpy as np
from onnx import helper, TensorProto, numpy_helper
w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10, "w")
g = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
    "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(m, "tiny.onnx")
EOF
  expect 0 "import a small ONNX model" import tiny.onnx -o tiny_onnx.dlg
  expect 0 "imported model checks" check tiny_onnx.dlg
  echo "keep" >imp_keep.dlg
  expect 1 "import of a non-ONNX file" import junk.npy -o imp_keep.dlg
  check "failed import leaves OUT untouched" test "$(cat imp_keep.dlg)" = "keep"
else
  echo "FAIL onnx is not available to $py"
  failed=$((failed + 1))
fi

finish
