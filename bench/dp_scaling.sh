#!/usr/bin/env bash
# bench/dp_scaling.sh — data-parallel training on this machine: 1 process x 2 threads against
# 2 processes x 1 thread (mpirun, runtime/rt_dp.c) at the same global batch, for the MLP sample
# (global batch 256) and the CNN sample (global batch 64), and the share of each step the
# processes wait for the gradient all-reduce, with buckets overlapping backward and without
# (DLRT_COMM_OVERLAP=0); then the CNN with a BatchNormalization, per-rank and synchronised. Results and the projection to 8 and 64 machines: docs/performance.md.
#
# usage: bash bench/dp_scaling.sh [BUILD] [STEPS] [REPEAT]   (defaults: build, 30, 3)
#
# Buckets of $DLRT_BUCKET_BYTES (default here 131072: the samples' gradients are far below
# DDP's 25 MiB, which would make one bucket and leave nothing to overlap).
#
# Runs BUILD/tests/test_dp --bench (synthetic data; step 1 is a warm-up, the mean of steps
# 2..STEPS is reported) REPEAT times per configuration, alternating them, and keeps the best of
# each. Per line: ms/step, the time a step waited for all-reduces after its backward ("comm
# wait", and its share of the step), the all-reduces' own time on the communicator's thread, the
# bytes each rank reduces per step and the bucket count. Other work on the machine inflates the
# times: the load average is printed first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
steps=${2:-30}
repeat=${3:-3}
case $build in /*) ;; *) build=$root/$build ;; esac
ninja -C "$build" -j2 dlcc dlrt test_dp >/dev/null
[ -e "$build/libdlrt_mpi.so" ] || { echo "dp_scaling.sh: no libdlrt_mpi.so (libopenmpi-dev)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlcc-dp-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export DLCC_CACHE_DIR=$tmp/cache
unset DLRT_THREADS DLRT_PROFILE DLRT_DEBUG_SPLIT DLRT_SPLIT_BYTES DLRT_COMM_OVERLAP
export DLRT_BUCKET_BYTES=${DLRT_BUCKET_BYTES:-131072}
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
# The CNN sample with a BatchNormalization after its convolution, its statistics per rank (bn)
# or synchronised across the ranks (bnsync: sync_batchnorm = true, 4 all-reduces of 32 floats
# inside every step, and no bucket overlap).
sed -e 's/^r = Relu (c)$/n = BatchNormalization (c, g1, e1, m1, v1)\nr = Relu (n)/' \
    -e 's/^param  c1  : float\[32\] .*$/&\nparam  g1 : float[32] = ones\nparam  e1 : float[32] = zeros\nparam  m1 : float[32] = zeros\nparam  v1 : float[32] = ones/' \
    "$root/samples/cnn_fmnist.dlg" >"$tmp/cnn_bn.dlg"
sed 's/^  optimizer = .*$/&\n  sync_batchnorm = true/' "$tmp/cnn_bn.dlg" >"$tmp/cnn_bnsync.dlg"
grep -q BatchNormalization "$tmp/cnn_bn.dlg" && grep -q sync_batchnorm "$tmp/cnn_bnsync.dlg" ||
    { echo "dp_scaling.sh: could not derive the BatchNorm CNN" >&2; exit 1; }
for spec in mlp:$root/samples/mlp_fmnist.dlg:N:256 cnn:$root/samples/cnn_fmnist.dlg:N:64 \
    bn:$tmp/cnn_bn.dlg:N:64 bnsync:$tmp/cnn_bnsync.dlg:N:64; do
    IFS=: read -r name file dim global <<<"$spec"
    "$build/dlcc" compile --no-cache -D "$dim=$global" "$file" -o "$tmp/${name}1.so"
    "$build/dlcc" compile --no-cache -D "$dim=$((global / 2))" "$file" -o "$tmp/${name}2.so"
done
best() { sort -t: -k2 -g | head -1 | cut -d: -f3-; }
for name in mlp cnn bn bnsync; do
    : >"$tmp/a" ; : >"$tmp/b"; : >"$tmp/c"
    for _ in $(seq "$repeat"); do
        "$build/tests/test_dp" single "$tmp/${name}1.so" "$steps" /dev/null --bench --threads 2 |
            sed -nE 's/^bench: (.*: ([0-9.]+) ms\/step.*)/x:\2:\1/p' >>"$tmp/a"
        mpirun -np 2 --oversubscribe --bind-to none -x DLRT_BUCKET_BYTES "$build/tests/test_dp" train \
            "$tmp/${name}2.so" "$steps" /dev/null --bench --threads 1 |
            sed -nE 's/^bench: (.*: ([0-9.]+) ms\/step.*)/x:\2:\1/p' >>"$tmp/b"
        DLRT_COMM_OVERLAP=0 mpirun -np 2 --oversubscribe --bind-to none -x DLRT_COMM_OVERLAP \
            -x DLRT_BUCKET_BYTES \
            "$build/tests/test_dp" \
            train "$tmp/${name}2.so" "$steps" /dev/null --bench --threads 1 |
            sed -nE 's/^bench: (.*: ([0-9.]+) ms\/step.*)/x:\2:\1/p' >>"$tmp/c"
    done
    echo "$name, 1 process:              $(best <"$tmp/a")"
    echo "$name, 2 processes, overlap:   $(best <"$tmp/b")"
    echo "$name, 2 processes, no overlap: $(best <"$tmp/c")"
done
