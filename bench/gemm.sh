#!/usr/bin/env bash
# bench/gemm.sh — GFLOP/s of dlcc's compiled float32 MatMul vs OpenBLAS (single thread).
#
# usage: bash bench/gemm.sh [SHAPE...]       (default: 256 512 1024)
#        bash bench/gemm.sh --train          (the benchmark models' training products, below)
#        BUILD=build-x bash bench/gemm.sh    (build directory; default: build)
# SHAPE: N (a square N x N x N MatMul) or MxNxK with an optional tA and/or tB suffix: the Gemm
# C[M, N] = op(A) op(B) with A stored [K, M] (tA) and B stored [N, K] (tB), e.g. 256x1024x1024tB
# (the input gradient dX = dY W^T of a 1024-1024 layer at batch 256).
#
# Assumes `cmake -S . -B build -G Ninja` has configured BUILD; builds dlcc and libdlrt there,
# compiles bench/gemm_bench.c with cc against BUILD/libdlrt.so and OpenBLAS (tools/setup.sh
# installs libopenblas-dev; this script installs nothing), writes one `c = MatMul (a, b)` model
# per size into a temporary directory, compiles it with `BUILD/dlcc compile`, and runs the
# driver, which times dlrt_session_infer and cblas_sgemm (OPENBLAS_NUM_THREADS=1) on the same
# inputs, best of several repetitions after two warm-up runs. Results: docs/performance.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(256 512 1024)
if [ "${sizes[0]}" = --train ]; then
    # forward x W, dW = X^T dY (tA), dX = dY W^T (tB) of the MLPs (784-512-512-10 at batch 128,
    # 784-1024x3-10 at 256), the transformer block's projections and feed-forward (1024 tokens,
    # d 256, ff 1024), and the last layer's thin gradients
    sizes=(128x512x784 784x512x128tA 128x512x512tB 256x1024x1024 1024x1024x256tA
        256x1024x1024tB 1024x768x256 1024x1024x256 1024x256x1024 1024x256x1024tB
        256x1024x1024tA 128x512x10tB 10x512x128tA)
fi

if [ ! -f "$build/build.ninja" ]; then
    echo "gemm.sh: $build is not configured; run: cmake -S . -B $build -G Ninja" >&2
    exit 1
fi
ninja -C "$build" -j2 dlcc dlrt >/dev/null

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlcc-gemm-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cc -O2 -std=c17 -D_POSIX_C_SOURCE=200809L -I"$root/runtime" -I/usr/include/x86_64-linux-gnu \
    "$root/bench/gemm_bench.c" -o "$tmp/gemm_bench" \
    -L"$build" -Wl,-rpath,"$build" -ldlrt -lopenblas -lm

export OPENBLAS_NUM_THREADS=1 DLRT_THREADS=1 # both on one thread: the driver times the calling thread's CPU time
# OpenBLAS's best kernels for this CPU (bench/openblas_core.sh: 0.3.21 would run its generic
# SSE3 core on a newer Intel model, and the ratios would flatter dlcc five times over).
. "$root/bench/openblas_core.sh"
openblas_core "$tmp"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "OpenBLAS: $OB_NOTE"
echo "             shape  dlcc GFLOP/s  OpenBLAS GFLOP/s  ratio"
status=0
for n in "${sizes[@]}"; do
    if [[ $n =~ ^[0-9]+$ ]]; then
        printf 'model gemm%s\ninput a : float[%s, %s]\ninput b : float[%s, %s]\nc = MatMul (a, b)\noutput c\n' \
            "$n" "$n" "$n" "$n" "$n" >"$tmp/mm$n.dlg"
        "$build/dlcc" compile "$tmp/mm$n.dlg" -o "$tmp/mm$n.so"
        "$tmp/gemm_bench" "$n" "$tmp/mm$n.so" || status=1
    elif [[ $n =~ ^([0-9]+)x([0-9]+)x([0-9]+)(tA)?(tB)?$ ]]; then
        m=${BASH_REMATCH[1]} nn=${BASH_REMATCH[2]} k=${BASH_REMATCH[3]}
        ta=0 tb=0 as="$m, $k" bs="$k, $nn"
        [ -z "${BASH_REMATCH[4]}" ] || { ta=1; as="$k, $m"; }
        [ -z "${BASH_REMATCH[5]}" ] || { tb=1; bs="$nn, $k"; }
        printf 'model gemm\ninput a : float[%s]\ninput b : float[%s]\nc = Gemm <transA = %s, transB = %s> (a, b)\noutput c\n' \
            "$as" "$bs" "$ta" "$tb" >"$tmp/g$n.dlg"
        "$build/dlcc" compile "$tmp/g$n.dlg" -o "$tmp/g$n.so"
        "$tmp/gemm_bench" "$m" "$nn" "$k" "$ta" "$tb" "$tmp/g$n.so" || status=1
    else
        echo "gemm.sh: bad shape '$n' (expected N or MxNxK[tA][tB])" >&2
        exit 2
    fi
done
exit $status
