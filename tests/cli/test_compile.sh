#!/usr/bin/env bash
# tests/cli/test_compile.sh — end-to-end tests of `dlcc compile` and of `dlcc run` on compiled
# artifacts: default and -o output paths, byte-identical artifacts for the same model, failed
# compiles that write nothing (and leave an existing OUT alone), usage errors (exit 2), artifacts
# that run and agree with the reference evaluator, a .so that is not an artifact (exit 1), -v,
# outputs that are FIFOs (written in place, not replaced), and no leftover dlcc-link-* directory
# in $TMPDIR.
# usage: test_compile.sh DLCC SOURCE_DIR LIBDLRT
#
# Inputs are made with /usr/bin/python3 + numpy. Every case prints "ok" or "FAIL" with the
# command's output; the last line is "N passed, N failed".
set -u
if [ $# -ne 3 ]; then
  echo "usage: test_compile.sh DLCC SOURCE_DIR LIBDLRT" >&2
  exit 2
fi
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
prog=$dlcc
libdlrt=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
# The harness gives a private TMPDIR: the link step's temporary directory must be gone after
# every command.
source "$(cd "$2" && pwd)/tests/harness/cli_lib.sh"

tmp_is_empty() { [ -z "$(ls -A "$TMPDIR")" ]; }

# ---------------------------------------------------------------------------------------------
# Models

cat >ew.dlg <<'EOF'
model ew
input a : float[4, 5]
input b : float[5]
input pos_c : float[4, 5]
input k : int32[4, 5]
param w : float[4, 5] = uniform(-1, 1, seed = 3)
param h : float16[5] = normal(0, 1, seed = 4)
y = Add (a, b)
z = Mul (y, w)
t = Tanh (z)
s = Sigmoid (a)
r = Relu (t)
l = Log (pos_c)
q = Sqrt (pos_c)
e = Exp (b)
g = Greater (a, b)
m = Where (g, a, z)
hb = Add (h, h)
hf = Cast <to = "float"> (hb)
u = Div (l, q)
kk = Add (k, k)
output r
output s
output m
output u
output hf
output e
output kk
output g
EOF

cat >parse_err.dlg <<'EOF'
model bad
input x : float[2, 3
y = Relu (x)
output y
EOF

cat >shape_err.dlg <<'EOF'
model bad
input x : float[2, 3]
input v : float[4]
y = Add (x, v)
output y
EOF

"$py" - <<'EOF'
import numpy as np
rng = np.random.default_rng(5)
np.save("a.npy", rng.standard_normal((4, 5)).astype(np.float32))
np.save("b.npy", rng.standard_normal(5).astype(np.float32))
np.save("pos_c.npy", rng.uniform(0.1, 3, (4, 5)).astype(np.float32))
np.save("k.npy", rng.integers(-50, 50, (4, 5)).astype(np.int32))
EOF

# cmp_npys DIR_GOT DIR_WANT NAME...: every NAME.npy in both dirs agrees (dtype, shape, values;
# floats within rtol 1e-5 / atol 1e-6, everything else exactly).
cmp_npys() {
  "$py" - "$@" <<'EOF'
import sys, numpy as np
got_dir, want_dir, names = sys.argv[1], sys.argv[2], sys.argv[3:]
ok = True
for n in names:
    g = np.load(f"{got_dir}/{n}.npy"); w = np.load(f"{want_dir}/{n}.npy")
    if g.dtype != w.dtype or g.shape != w.shape:
        print(f"  {n}: got {g.dtype}{list(g.shape)}, want {w.dtype}{list(w.shape)}"); ok = False
    elif g.dtype.kind == "f":
        if not np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-5, atol=1e-6,
                           equal_nan=True):
            print(f"  {n}: max |diff| {np.max(np.abs(g.astype(np.float64) - w)):.3g}"); ok = False
    elif not np.array_equal(g, w):
        print(f"  {n}: values differ"); ok = False
sys.exit(0 if ok else 1)
EOF
}

# ---------------------------------------------------------------------------------------------
# Output paths and determinism

expect 0 "compile writes FILE.so by default" compile ew.dlg
check "ew.so exists" test -s ew.so
check "compile prints nothing on success" test ! -s "$out" -a ! -s "$err"
check "ew.so is an ELF shared object" bash -c "head -c 4 ew.so | od -c | grep -q 'E   L   F'"
expect 0 "compile -o OUT" compile ew.dlg -o out1.so
check "out1.so exists" test -s out1.so
expect 0 "compile --output OUT" compile --output out2.so ew.dlg
check "compiling twice gives byte-identical artifacts (default vs -o)" cmp ew.so out1.so
check "compiling twice gives byte-identical artifacts (-o vs --output)" cmp out1.so out2.so
cp ew.dlg "$work/sub_ew.dlg"
mkdir -p sub
cp ew.dlg sub/ew.dlg
expect 0 "compile a file in another directory" compile sub/ew.dlg
check "the default output goes next to the model" test -s sub/ew.so
check "the artifact does not depend on the model's directory" cmp ew.so sub/ew.so
cp ew.dlg noext
expect 0 "compile a file without .dlg" compile noext
check "noext.so is written" test -s noext.so
expect 0 "compile -O0" compile ew.dlg -O 0 -o o0.so
expect 0 "compile -O0 again" compile ew.dlg -O 0 -o o0b.so
check "-O0 is deterministic too" cmp o0.so o0b.so
check "TMPDIR is empty after successful compiles" tmp_is_empty

# ---------------------------------------------------------------------------------------------
# Failed compiles write nothing

expect_msg 1 "parse error exits 1 with its diagnostic" "parse_err.dlg:3:1: error:" compile parse_err.dlg
check "parse error: no default output" test ! -e parse_err.so
check "parse error: the diagnostic is an error" grep -q "error" "$err"
expect_msg 1 "shape error exits 1 with its diagnostic" "shape_err.dlg:4:" compile shape_err.dlg
check "shape error: names the op" grep -q "Add" "$err"
check "shape error: no default output" test ! -e shape_err.so
expect 1 "shape error with -o" compile shape_err.dlg -o new.so
check "shape error: no -o output" test ! -e new.so
printf 'keep me\n' >old.so
expect 1 "parse error over an existing OUT" compile parse_err.dlg -o old.so
check "an existing OUT is untouched after a parse error" grep -qx 'keep me' old.so
expect 1 "shape error over an existing OUT" compile shape_err.dlg -o old.so
check "an existing OUT is untouched after a shape error" grep -qx 'keep me' old.so
expect 1 "a missing model file" compile missing.dlg -o old.so
check "an existing OUT is untouched after a missing file" grep -qx 'keep me' old.so
DLCC_LD=/bin/false expect_msg 1 "a failing linker exits 1" "linker /bin/false failed" compile ew.dlg -o old.so
check "an existing OUT is untouched after a link failure" grep -qx 'keep me' old.so
DLCC_LD=/nonexistent/ld expect_msg 1 "a missing linker exits 1" "linker '/nonexistent/ld' not found" compile ew.dlg -o ldfail.so
check "a missing linker: no output" test ! -e ldfail.so
check "no stray files next to the outputs" bash -c '! ls -A | grep -E "\.tmp|~$|^\.old|^old\.so\."'
check "TMPDIR is empty after failed compiles" tmp_is_empty

# ---------------------------------------------------------------------------------------------
# Usage errors: exit 2, nothing written

expect_msg 2 "-O 7" "-O expects 0, 1, 2 or 3, got '7'" compile ew.dlg -O 7 -o usage.so
expect 2 "-O without a value" compile ew.dlg -O
expect_msg 2 "unknown flag" "unknown flag '--bogus'" compile ew.dlg --bogus -o usage.so
expect_msg 2 "no model file" "no model file" compile
expect_msg 2 "no model file (only flags)" "no model file" compile -o usage.so
expect 2 "two model files" compile ew.dlg sub/ew.dlg -o usage.so
expect 2 "-D without '='" compile ew.dlg -D N -o usage.so
check "usage errors write nothing" test ! -e usage.so

# ---------------------------------------------------------------------------------------------
# Running artifacts

ins=(--in a=a.npy --in b=b.npy --in pos_c=pos_c.npy --in k=k.npy)
names=(r s m u hf e kk g)
outs_for() { # outs_for DIR: --out NAME=DIR/NAME.npy for every output
  local n
  for n in "${names[@]}"; do printf -- '--out\n%s=%s/%s.npy\n' "$n" "$1" "$n"; done
}
mkdir -p got ref dlgcpu
mapfile -t got_outs < <(outs_for got)
mapfile -t ref_outs < <(outs_for ref)
mapfile -t cpu_outs < <(outs_for dlgcpu)
expect 0 "run the artifact" run ew.so "${ins[@]}" "${got_outs[@]}"
expect 0 "run the model with --backend ref" run ew.dlg --backend ref "${ins[@]}" "${ref_outs[@]}"
check "the artifact equals the reference evaluator" cmp_npys got ref "${names[@]}"
expect 0 "run the model with --backend cpu" run ew.dlg --backend cpu "${ins[@]}" "${cpu_outs[@]}"
check "run .dlg --backend cpu equals the artifact bit for bit" \
  bash -c 'for n in "$@"; do cmp -s got/$n.npy dlgcpu/$n.npy || exit 1; done' _ "${names[@]}"
expect 0 "run the artifact without --out" run ew.so "${ins[@]}"
check "the preview lists the outputs" grep -qE '^kk: int32\[4, 5\] = \[' "$out"
expect 0 "run an artifact with an explicit --backend cpu" run ew.so --backend cpu "${ins[@]}"
expect_msg 1 "run an artifact with a missing input" "missing input 'pos_c': expected float[4, 5]" run ew.so --in a=a.npy --in b=b.npy
expect_msg 1 "run an artifact with a wrong-shape input" "input 'a': expected float[4, 5], got float[5] (from b.npy)" run ew.so --in a=b.npy --in b=b.npy --in pos_c=pos_c.npy --in k=k.npy
expect_msg 1 "run an artifact with a wrong-dtype input" "input 'k': expected int32[4, 5], got float[4, 5] (from a.npy)" run ew.so --in a=a.npy --in b=b.npy --in pos_c=pos_c.npy --in k=a.npy
expect_msg 2 "run X.so --backend ref is a usage error" "compiled artifact" run ew.so --backend ref "${ins[@]}"
expect_msg 2 "run X.so -D is a usage error" "dims of a compiled artifact are fixed" run ew.so -D N=3 "${ins[@]}"
check "TMPDIR is empty after runs" tmp_is_empty

# Shared objects that are not dlcc artifacts.
cp "$libdlrt" notart.so
expect_msg 1 "a .so that is not a dlcc artifact" "not a dlcc artifact" run notart.so "${ins[@]}"
check "  ... and the message names the file" grep -qF "notart.so" "$err"
head -c 3000 ew.so >trunc.so
run_dlcc run trunc.so "${ins[@]}"
if [ "$rc" -eq 1 ] && [ -s "$err" ]; then pass "a truncated artifact exits 1 with a message"; else
  echo "  exit $rc, wanted 1 with a message"; fail "a truncated artifact exits 1 with a message"; fi
printf 'not even ELF\n' >fake.so
expect 1 "a text file named .so exits 1" run fake.so "${ins[@]}"

# ---------------------------------------------------------------------------------------------
# -v

expect 0 "compile -v" compile -v ew.dlg -o verbose.so
check "-v prints the target" grep -qE 'for [a-z0-9_]+-[a-z0-9_-]+/[A-Za-z0-9_.-]+' "$err"
check "-v prints the timing" grep -qE '[0-9]+\.[0-9] ms' "$err"
check "-v prints the output and its size" grep -qF "wrote verbose.so (" "$err"
check "-v prints nothing on stdout" test ! -s "$out"
check "-v does not change the artifact" cmp ew.so verbose.so

# ---------------------------------------------------------------------------------------------
# More op families through compile + run (models whose ops the cpu backend lowers)

"$py" - <<'EOF'
import numpy as np
rng = np.random.default_rng(11)
np.save("x.npy", rng.standard_normal((6, 5)).astype(np.float32))
np.save("img.npy", rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
np.save("lab.npy", rng.integers(0, 4, 6).astype(np.int64))
EOF

cat >fam_mlp.dlg <<'EOF'
model fam_mlp
input x : float[6, 5]
input lab : int64[6]
param w1 : float[5, 4] = glorot_uniform(seed = 1)
param b1 : float[4] = uniform(-1, 1, seed = 2)
param w2 : float[4, 4] = he_normal(seed = 3)
h = Gemm (x, w1, b1)
a = Relu (h)
lg = MatMul (a, w2)
p = Softmax <axis = -1> (lg)
lp = LogSoftmax <axis = 1> (lg)
s = ReduceSum <axes = [1], keepdims = 0> (x)
mx = ReduceMax <axes = [0]> (x)
am = ArgMax <axis = 1> (x)
t = Transpose <perm = [1, 0]> (x)
loss = SoftmaxCrossEntropyLoss (lg, lab)
output p
output lp
output s
output mx
output am
output t
output loss
EOF

cat >fam_cnn.dlg <<'EOF'
model fam_cnn
input img : float[2, 3, 8, 8]
param k : float[4, 3, 3, 3] = he_normal(seed = 5)
param kb : float[4] = uniform(-0.1, 0.1, seed = 6)
param g : float[4] = ones
param bt : float[4] = zeros
c = Conv <pads = [1, 1, 1, 1]> (img, k, kb)
r = Relu (c)
mp = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)
ap = AveragePool <kernel_shape = [2, 2], strides = [2, 2]> (r)
ga = GlobalAveragePool (mp)
f = Flatten (ga)
cc = Concat <axis = 1> (mp, ap)
output f
output cc
EOF

family_case() { # family_case NAME INPUTS... -- OUTPUTS...: compile + run vs ref
  local name=$1
  shift
  local fins=() fouts=()
  while [ "$1" != "--" ]; do fins+=(--in "$1"); shift; done
  shift
  local o
  mkdir -p "got_$name" "ref_$name"
  local gouts=() routs=()
  for o in "$@"; do gouts+=(--out "$o=got_$name/$o.npy"); routs+=(--out "$o=ref_$name/$o.npy"); done
  expect 0 "$name: compile" compile "$name.dlg"
  if [ "$rc" -ne 0 ]; then return; fi
  expect 0 "$name: run the artifact" run "$name.so" "${fins[@]}" "${gouts[@]}"
  expect 0 "$name: run --backend ref" run "$name.dlg" --backend ref "${fins[@]}" "${routs[@]}"
  check "$name: the artifact equals the reference evaluator" cmp_npys "got_$name" "ref_$name" "$@"
}
family_case fam_mlp x=x.npy lab=lab.npy -- p lp s mx am t loss
family_case fam_cnn img=img.npy -- f cc

# An output that is a stream (a FIFO here; /dev/null alike) is written where it stands: renaming
# a temporary file over it would replace the node with a regular file (as root, /dev/null).
mkfifo art_fifo out_fifo
timeout 60 cat art_fifo >from_art_fifo & # bounded: a regression would leave cat waiting
expect 0 "compile -o FIFO" compile fam_mlp.dlg -o art_fifo
wait
check "the FIFO is still a FIFO after compile -o" test -p art_fifo
check "the artifact came through the FIFO" cmp from_art_fifo fam_mlp.so
timeout 60 cat out_fifo >from_out_fifo &
expect 0 "run --out NAME=FIFO" run fam_mlp.so --in x=x.npy --in lab=lab.npy --out p=out_fifo
wait
check "the FIFO is still a FIFO after run --out" test -p out_fifo
check "the output came through the FIFO" cmp from_out_fifo got_fam_mlp/p.npy

# Target options: unknown names are usage errors, never an LLVM abort; an artifact that needs
# instructions this CPU lacks is refused with a message instead of dying of SIGILL.
expect_msg 2 "--cpu with an unknown name" "unknown CPU 'nosuchcpu'" compile fam_mlp.dlg --cpu nosuchcpu -o cpu_bad.so
check "no artifact for an unknown CPU" test ! -e cpu_bad.so
expect_msg 2 "--features without +/-" "bad target feature 'avx2'" compile fam_mlp.dlg --features avx2 -o f_bad.so
expect_msg 2 "--features with an unknown name" "bad target feature '+avx9'" compile fam_mlp.dlg --features +avx9 -o f_bad.so
expect 0 "--cpu i686 (no 64-bit feature of its own) compiles, no abort" compile fam_mlp.dlg --cpu i686 -o i686.so
expect 0 "--cpu x86-64-v2 with features" compile fam_mlp.dlg --cpu x86-64-v2 --features -avx2,+sse4.2 -o v2.so
expect 0 "an x86-64-v2 artifact runs here" run v2.so --in x=x.npy --in lab=lab.npy
if ! grep -qw avx512f /proc/cpuinfo; then
  expect 0 "compile for avx512f on a CPU without it" compile fam_mlp.dlg --cpu skylake-avx512 --features +avx512f -o avx512.so
  expect_msg 1 "running it is refused, not a SIGILL" "uses avx512f, which this CPU lacks" run avx512.so --in x=x.npy --in lab=lab.npy
fi

check "TMPDIR is empty at the end (no dlcc-link-* left)" tmp_is_empty
if ! tmp_is_empty; then ls -la "$TMPDIR"; fi

finish
