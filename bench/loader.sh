#!/usr/bin/env bash
# bench/loader.sh — how long the trainer waits for libdlrt's data loader: a producer that takes
# 0.5 s per batch and a training step of 0.1 s, with P = 1 and P = 8 producers and K = 16 slots,
# 40 batches each (about 25 s in all). Prints side by side the steady-state mean wait per batch
# (every batch after the first), the longest such wait, and the first batch's latency on its own
# line. Target: steady-state mean wait under 1 ms at P = 8.
#
# usage: bash bench/loader.sh [PRODUCE_S STEP_S BATCHES SLOTS]   (default 0.5 0.1 40 16)
#        BUILD=build-x bash bench/loader.sh   (build directory; default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
if [ ! -f "$build/build.ninja" ]; then
    echo "loader.sh: $build is not configured; run: cmake -S . -B $build -G Ninja" >&2
    exit 1
fi
ninja -C "$build" -j2 loader_bench >/dev/null
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
"$build/tests/loader_bench" "$@"
