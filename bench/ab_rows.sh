#!/usr/bin/env bash
# bench/ab_rows.sh — A/B of two dlcc builds on row operations with elementwise producers: a
# masked attention Softmax, Softmax(s + mask) over [8, 4, 128, 128] with a causal mask of -1e9
# (the upper triangle; the rest 0), and the LayerNormalization of a residual sum,
# LayerNormalization(x + y) over [1024, 256] (infer, bench/step_bench.c), at 1 and 2 threads, 5
# rounds alternating the builds; prints one line per run ("B|A t=T WORK MS_PER_CALL") and the load
# average after each round. Results: docs/performance.md ("Row operations with their producers,
# and exp below -104").
#
# usage: bash bench/ab_rows.sh BEFORE_BUILD AFTER_BUILD   (build directories with dlcc, libdlrt)
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: bash bench/ab_rows.sh BEFORE_BUILD AFTER_BUILD" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "$1" && pwd)
A=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlcc-abrows-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
cat >sm_mask.dlg <<'EOF'
model sm_mask
input s    : float[8, 4, 128, 128]
input mask : float[128, 128]
t = Add (s, mask)
p = Softmax <axis = -1> (t)
output p
EOF
cat >ln_res.dlg <<'EOF'
model ln_res
input x : float[1024, 256]
input y : float[1024, 256]
param g : float[256] = ones
param b : float[256] = zeros
r = Add (x, y)
n = LayerNormalization <axis = -1, epsilon = 1e-5> (r, g, b)
output n
EOF
/usr/bin/python3 -c "
import numpy as np; r = np.random.default_rng(0)
np.save('s.npy', r.standard_normal((2, 8, 4, 128, 128)).astype(np.float32))
np.save('mask.npy', np.triu(np.full((128, 128), -1e9, np.float32), 1)[None])
np.save('x.npy', r.standard_normal((2, 1024, 256)).astype(np.float32))
np.save('y.npy', r.standard_normal((2, 1024, 256)).astype(np.float32))"
for side in B A; do
    d=${!side}
    gcc -O2 -I"$root/runtime" "$root/bench/step_bench.c" -o "./sb_$side" -L"$d" -ldlrt \
        -Wl,-rpath,"$d"
    "$d/dlcc" compile sm_mask.dlg -o "sm_$side.so" --no-cache -v 2>&1 | grep 'infer:' |
        sed "s/^/$side softmax: /"
    "$d/dlcc" compile ln_res.dlg -o "ln_$side.so" --no-cache -v 2>&1 | grep 'infer:' |
        sed "s/^/$side layernorm: /"
done
for round in 1 2 3 4 5; do
    for side in B A; do
        for t in 1 2; do
            echo "$side t=$t masked_softmax" \
                "$("./sb_$side" "sm_$side.so" infer $t 300 30 s=s.npy mask=mask.npy | cut -d' ' -f2)"
            echo "$side t=$t residual_layernorm" \
                "$("./sb_$side" "ln_$side.so" infer $t 1000 100 x=x.npy y=y.npy | cut -d' ' -f2)"
        done
    done
    echo "round $round load $(cut -d' ' -f1-3 /proc/loadavg)"
done
