#!/usr/bin/env bash
# bench/compare.sh — issue 17's comparison, in one command: dlcc's train steps against PyTorch at
# 1 and 2 threads, inference against ONNX Runtime and PyTorch at batch 1 and 256, GEMM against
# OpenBLAS (square and the thin training shapes), as ratios (their time / dlcc's), GFLOP/s and %
# of the machine's measured FMA peak. Results: docs/performance.md.
#
# usage: bash bench/compare.sh [--quick] [--rounds R] [--ftz] [--no-ort]
#        BUILD=build-x bash bench/compare.sh       (build directory; default: build)
#
#   --quick      one round of few steps: a smoke test of the whole pipeline (~2-3 min)
#   --rounds R   rounds of the timing (default 5; the median is reported)
#   --ftz        flush denormals to zero in every system (dlcc --ftz, torch.set_flush_denormal,
#                ONNX Runtime's session.set_denormal_as_zero)
#   --no-ort     leave ONNX Runtime out (no npm install)
#
# Needs: BUILD configured (cmake -S . -B BUILD -G Ninja; dlcc and libdlrt are built here),
# /usr/bin/python3 with numpy and torch (tools/setup.sh: python3-torch), OpenBLAS
# (libopenblas-dev), a C compiler, and for ONNX Runtime `node` and `npm` (not in tools/setup.sh,
# whose packages every build needs: on Debian 12 `apt-get install nodejs npm`). The first run
# installs npm's onnxruntime-node (pinned below, ~300 MB, from the npm registry) into
# BUILD/bench-npm; later runs reuse it. Without node/npm, or when the install fails, the ONNX
# Runtime rows are left out and the script says so.
#
# Everything runs in this process tree: bench/compare.py compiles the models of bench/models/
# with BUILD/dlcc (through its own cache, BUILD/bench-cache, kept between runs), proves each
# train model computes PyTorch's step (parity, through the Python binding) and times only those
# that do, alternating the systems round by round (see its docstring). Other load on the
# machine distorts everything: the load average is printed at the start, after each round and
# at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
ORT_VERSION=1.30.0
py_args=()
use_ort=1
while [ $# -gt 0 ]; do
    case $1 in
    --quick | --ftz) py_args+=("$1") ;;
    --rounds)
        py_args+=(--rounds "${2:?--rounds needs a number}")
        shift
        ;;
    --no-ort) use_ort=0 ;;
    *)
        echo "compare.sh: unknown argument '$1' (see the comment at the top)" >&2
        exit 2
        ;;
    esac
    shift
done
if [ ! -f "$build/build.ninja" ]; then
    echo "compare.sh: $build is not configured; run: cmake -S . -B $build -G Ninja" >&2
    exit 1
fi
ninja -C "$build" -j2 dlcc dlrt dlcc_shared >/dev/null

work=$(mktemp -d "${TMPDIR:-/tmp}/dlcc-compare-XXXXXX")
trap 'rm -rf "$work"' EXIT
cflags=(-O2 -std=c17 -D_POSIX_C_SOURCE=200809L -I"$root/runtime" -I/usr/include/x86_64-linux-gnu)
cc "${cflags[@]}" "$root/bench/step_bench.c" -o "$work/step_bench" -L"$build" \
    -Wl,-rpath,"$build" -ldlrt
cc "${cflags[@]}" "$root/bench/gemm_bench.c" -o "$work/gemm_bench" -L"$build" \
    -Wl,-rpath,"$build" -ldlrt -lopenblas -lm
cc -O2 -std=c17 "$root/bench/fma_peak.c" -o "$work/fma_peak" -lpthread

# OpenBLAS gets its best kernels for this CPU (bench/openblas_core.sh: a CPU newer than the
# library would run its generic SSE3 core).
. "$root/bench/openblas_core.sh"
openblas_core "$work"
py_args+=(--openblas-note "$OB_NOTE")

if [ $use_ort = 1 ]; then
    npm_dir=$build/bench-npm
    ort_dir=$npm_dir/node_modules/onnxruntime-node
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "compare.sh: no node/npm (apt-get install nodejs npm): ONNX Runtime rows left out" >&2
    elif [ -f "$ort_dir/package.json" ] &&
        grep -q "\"version\": \"$ORT_VERSION\"" "$ort_dir/package.json"; then
        py_args+=(--ort "$ort_dir")
    else
        echo "compare.sh: installing npm onnxruntime-node@$ORT_VERSION into $npm_dir" >&2
        mkdir -p "$npm_dir"
        # ONNXRUNTIME_NODE_INSTALL=skip: the CPU library is in the package; skip the install
        # script's download of the CUDA provider (from nuget.org).
        if ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix "$npm_dir" --no-save --no-audit \
            --no-fund "onnxruntime-node@$ORT_VERSION" >&2; then
            py_args+=(--ort "$ort_dir")
        else
            echo "compare.sh: npm install failed: ONNX Runtime rows left out" >&2
        fi
    fi
fi

/usr/bin/python3 "$root/bench/compare.py" --build "$build" --work "$work" \
    --cache "$build/bench-cache" "${py_args[@]}"
