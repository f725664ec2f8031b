#!/usr/bin/env bash
# bench/ab_fusion.sh — A/B of two dlcc builds on the benchmark models of bench/compare.sh: the
# train steps of the MLP 784-512-512-10 Adam (b128), the transformer block (b8) and the CNN
# (b64), and inference of the MLP 784-1024x3-10 at batch 1, at 1 and 2 threads, through
# bench/step_bench.c, 3 rounds alternating the builds; prints one line per run
# ("B|A t=T WORK MS_PER_STEP") and the load average after each round. Results:
# docs/performance.md ("Fusion and the matrix-vector kernels").
#
# usage: bash bench/ab_fusion.sh BEFORE_BUILD AFTER_BUILD   (build directories with dlcc, libdlrt)
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: bash bench/ab_fusion.sh BEFORE_BUILD AFTER_BUILD" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "$1" && pwd)
A=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlcc-ab-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
/usr/bin/python3 -c "
import numpy as np; r=np.random.default_rng(0)
np.save('ab_mlp_x.npy', r.standard_normal((4,128,784)).astype(np.float32)); np.save('ab_mlp_y.npy', r.integers(0,10,(4,128)).astype(np.int64))
np.save('ab_tr_x.npy', r.standard_normal((2,8,128,256)).astype(np.float32)); np.save('ab_tr_t.npy', r.standard_normal((2,8,128,256)).astype(np.float32))
np.save('ab_x1.npy', r.standard_normal((8,1,784)).astype(np.float32)); np.save('ab_y1.npy', np.zeros((8,1),dtype=np.int64))
np.save('ab_cnn_x.npy', r.standard_normal((2,64,1,28,28)).astype(np.float32)); np.save('ab_cnn_y.npy', r.integers(0,10,(2,64)).astype(np.int64))"
for side in B A; do
  d=${!side}
  gcc -O2 -I$root/runtime $root/bench/step_bench.c -o ./sb_$side -L$d -ldlrt -Wl,-rpath,$d
  export DLCC_CACHE_DIR=$tmp/cache-$side
  $d/dlcc compile $root/bench/models/mlp_512_adam.dlg -o ab_mlp_$side.so
  $d/dlcc compile $root/bench/models/transformer.dlg -o ab_tr_$side.so
  $d/dlcc compile $root/bench/models/cnn.dlg -o ab_cnn_$side.so
  $d/dlcc compile $root/bench/models/mlp_1024_adam.dlg -D N=1 -o ab_inf1_$side.so
done
for round in 1 2 3; do
  for side in B A; do
    for t in 1 2; do
      echo "$side t=$t mlp512adam $(./sb_$side ab_mlp_$side.so train $t 60 10 x=ab_mlp_x.npy y=ab_mlp_y.npy | cut -d' ' -f2)"
      echo "$side t=$t transformer $(./sb_$side ab_tr_$side.so train $t 10 2 x=ab_tr_x.npy target=ab_tr_t.npy | cut -d' ' -f2)"
      echo "$side t=$t cnn $(./sb_$side ab_cnn_$side.so train $t 15 3 x=ab_cnn_x.npy y=ab_cnn_y.npy | cut -d' ' -f2)"
      echo "$side t=$t infer_b1 $(./sb_$side ab_inf1_$side.so infer $t 2000 200 x=ab_x1.npy y=ab_y1.npy | cut -d' ' -f2)"
    done
  done
  echo "round $round load $(cut -d' ' -f1-3 /proc/loadavg)"
done
