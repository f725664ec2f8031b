#!/usr/bin/env bash
# bench/compile_time.sh — wall time of `dlcc compile` (whole process: parse, shapes, LLVM -O3,
# link) for each sample, best of 5 runs, plus the artifact size. --no-cache: this measures
# compilation, not a cache hit (bench/cache_bench.sh measures those).
# Usage: bash bench/compile_time.sh [BUILD_DIR]   (default: build; builds dlcc if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -x "$build/dlcc" ] || { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && ninja -C "$build" dlcc >/dev/null; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-28s %12s %12s\n' "sample" "compile ms" "artifact KiB"
for f in samples/*.dlg; do
  best=""
  for _ in 1 2 3 4 5; do
    t0=$(date +%s%N)
    "$build/dlcc" compile --no-cache "$f" -o "$out/a.so" >/dev/null
    t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
  done
  kib=$(( $(stat -c %s "$out/a.so") / 1024 ))
  printf '%-28s %12s %12s\n' "$(basename "$f")" "$best" "$kib"
done
