#!/usr/bin/env bash
# bench/conv_grad_weight.sh — time per call of dlcc's compiled ConvGradWeight (best of 5,
# one thread unless THREADS says otherwise).
#
# usage: bash bench/conv_grad_weight.sh [N C H W M KH KW PAD]
#        (default: 64 1 28 28 32 3 3 1, i.e. dy [64, 32, 28, 28], x [64, 1, 28, 28], 3x3 pads 1)
#        BUILD=build-x bash bench/conv_grad_weight.sh   (build directory; default: build)
#        THREADS=2 bash bench/conv_grad_weight.sh        (session threads; default 1)
# Builds dlcc and libdlrt in BUILD, compiles bench/conv_grad_weight_bench.c against libdlrt,
# writes and compiles the one-node model into a temporary directory (private DLCC_CACHE_DIR)
# and runs the driver, which also checks the result against a naive loop.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(64 1 28 28 32 3 3 1)
read -r N C H W M KH KW P <<<"${args[*]}"

if [ ! -f "$build/build.ninja" ]; then
    echo "conv_grad_weight.sh: $build is not configured; run: cmake -S . -B $build -G Ninja" >&2
    exit 1
fi
ninja -C "$build" -j2 dlcc dlrt >/dev/null

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlcc-cgw-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export DLCC_CACHE_DIR=$tmp/cache
cc -O2 -std=c17 -D_POSIX_C_SOURCE=200809L -I"$root/runtime" "$root/bench/conv_grad_weight_bench.c" \
    -o "$tmp/cgw_bench" -L"$build" -Wl,-rpath,"$build" -ldlrt -lm
printf 'model cgw\ninput dy : float[%s, %s, %s, %s]\ninput x : float[%s, %s, %s, %s]\ndw = ConvGradWeight <kernel_shape = [%s, %s], pads = [%s, %s, %s, %s]> (dy, x)\noutput dw\n' \
    "$N" "$M" "$H" "$W" "$N" "$C" "$H" "$W" "$KH" "$KW" "$P" "$P" "$P" "$P" >"$tmp/cgw.dlg"
"$build/dlcc" compile "$tmp/cgw.dlg" -o "$tmp/cgw.so"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
"$tmp/cgw_bench" "$tmp/cgw.so" "$N" "$C" "$H" "$W" "$M" "$KH" "$KW" "$P" "${THREADS:-1}"
