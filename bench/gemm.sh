#!/usr/bin/env bash
# bench/gemm.sh — GFLOP/s of dlcc's compiled float32 MatMul vs OpenBLAS (single thread).
#
# usage: bash bench/gemm.sh [SIZE...]        (default sizes: 256 512 1024)
#        BUILD=build-x bash bench/gemm.sh    (build directory; default: build)
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

export OPENBLAS_NUM_THREADS=1
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "  size  dlcc GFLOP/s  OpenBLAS GFLOP/s  ratio"
status=0
for n in "${sizes[@]}"; do
    printf 'model gemm%s\ninput a : float[%s, %s]\ninput b : float[%s, %s]\nc = MatMul (a, b)\noutput c\n' \
        "$n" "$n" "$n" "$n" "$n" >"$tmp/mm$n.dlg"
    "$build/dlcc" compile "$tmp/mm$n.dlg" -o "$tmp/mm$n.so"
    "$tmp/gemm_bench" "$n" "$tmp/mm$n.so" || status=1
done
exit $status
