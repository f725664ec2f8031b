#!/usr/bin/env bash
# tests/fuzz_artifact/make_corpus.sh — rewrites the seed plans of tests/fuzz_artifact/corpus from
# real compiles (run it after a plan format change): the MLP sample with its train step (-D N=4)
# and a small elementwise model, compiled for a baseline CPU (--cpu x86-64) so the plans' ISA
# needs no more than any x86-64 machine has. A seed is the plan blob alone (from its DLRTPLAN
# magic, total_size bytes), the input rt__model_from_plan takes.
# usage: bash tests/fuzz_artifact/make_corpus.sh [BUILD_DIR]   (default: build)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
dlcc=${1:-$root/build}/dlcc
out=$root/tests/fuzz_artifact/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export DLCC_CACHE_DIR=$work/cache
cat >"$work/small.dlg" <<'DLG'
model small
input x : float[2, 3]
input h : float16[4]
param p : float[2, 3] = [[1, 2, 3], [4, 5, 6.5]]
param q : float16[4] = uniform(-1, 1, seed = 3)
y = Add (x, p)
z = Relu (y)
g = Mul (h, q)
b = Greater (x, p)
output z
output g
output b
DLG
"$dlcc" compile --no-cache --cpu x86-64 "$work/small.dlg" -o "$work/small.so"
"$dlcc" compile --no-cache --cpu x86-64 -D N=4 "$root/samples/mlp_fmnist.dlg" -o "$work/mlp.so"
# A product of the blocked GEMM on a param: format 8's prepack kernel and PACKED buffer.
cat >"$work/prepack.dlg" <<'DLG'
model prepack
input x : float[100, 200]
param w : float[200, 70] = uniform(-1, 1, seed = 1)
param b : float[70] = zeros
h = Gemm (x, w, b)
y = Relu (h)
output y
DLG
"$dlcc" compile --no-cache --cpu x86-64 "$work/prepack.dlg" -o "$work/prepack.so"
extract() { # extract ARTIFACT OUT: the plan blob
  python3 - "$1" "$2" <<'PY'
import struct, sys
b = open(sys.argv[1], 'rb').read()
at = b.find(b'DLRTPLAN')
assert at >= 0 and b.find(b'DLRTPLAN', at + 1) < 0, 'exactly one plan'
size = struct.unpack_from('<Q', b, at + 16)[0]
open(sys.argv[2], 'wb').write(b[at:at + size])
PY
}
extract "$work/small.so" "$out/valid-small.plan"
extract "$work/mlp.so" "$out/valid-mlp-train.plan"
extract "$work/prepack.so" "$out/valid-prepack.plan"
grep -q prepack "$out/valid-prepack.plan" || { echo "valid-prepack.plan has no prepack kernel" >&2; exit 1; }
ls -l "$out"/valid-*.plan
