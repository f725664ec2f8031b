#!/usr/bin/env bash
# bench/cache_bench.sh — what the compilation cache saves, per sample:
#   cold process: a whole `dlcc compile` on a fresh, empty cache directory (best of 3)
#   warm process: a whole `dlcc compile` that hits the cache (one warm-up, then best of 5)
#   warm API:     dlcc_compile_file on a hit, in process (the hidden `dlcc compile
#                 --bench-repeat N` flag loops the call N times and prints the fastest)
# usage: bash bench/cache_bench.sh [BUILD_DIR]   (default: build). Prints a Markdown table.
# Uses private cache directories under a temporary directory, never the user's cache.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
dlcc=$build/dlcc
[ -x "$dlcc" ] || { echo "no $dlcc: build first (ninja -C $build)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ms() { # ms CMD...: wall-clock milliseconds of one run (fails the script if CMD fails)
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
best() { sort -n | head -1; }

echo "| sample | cold process ms | warm process ms | speed-up | warm API ms |"
echo "|---|---:|---:|---:|---:|"
for f in "$root"/samples/*.dlg; do
  name=$(basename "$f")
  cold=$(for i in 1 2 3; do
    rm -rf "$work/cold"
    DLCC_CACHE_DIR=$work/cold ms "$dlcc" compile "$f" -o "$work/a.so"
  done | best)
  export DLCC_CACHE_DIR=$work/warm
  "$dlcc" compile "$f" -o "$work/a.so" # fill the cache
  ms "$dlcc" compile "$f" -o "$work/a.so" >/dev/null # warm-up
  warm=$(for i in 1 2 3 4 5; do ms "$dlcc" compile "$f" -o "$work/a.so"; done | best)
  api=$("$dlcc" compile --bench-repeat 200 "$f" -o "$work/a.so" | sed -n 's/.*min \([0-9.]*\) ms.*/\1/p')
  unset DLCC_CACHE_DIR
  awk -v n="$name" -v c="$cold" -v w="$warm" -v a="$api" \
    'BEGIN { printf "| `%s` | %.0f | %.1f | %.0fx | %.2f |\n", n, c / 1000, w / 1000, c / w, a }'
done
