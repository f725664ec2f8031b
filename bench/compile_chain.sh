#!/usr/bin/env bash
# bench/compile_chain.sh — compile cost against graph size: a chain of N Relu nodes
# (x -> Relu -> Relu -> ... -> y, float[64]) compiled without the cache. Per N: wall time, the
# artifact's size, the compiler's peak resident memory (/usr/bin/time -v), and the plan's
# dependency count (`dlcc inspect`-free: read from the plan header by a short Python helper).
# Every kernel of the chain runs in place on one buffer, so its plan must stay linear: before
# format 4 each kernel depended on every earlier one (quadratic deps, 37 MB at N = 4000).
# usage: bash bench/compile_chain.sh [BUILD_DIR] [N...]   (defaults: build, 1000 4000 8000)
# Prints a Markdown table. Uses a private cache directory and a temporary directory.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
sizes=${*:-1000 4000 8000}
dlcc=$build/dlcc
[ -x "$dlcc" ] || { echo "no $dlcc: build first (ninja -C $build dlcc)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs GNU time at /usr/bin/time" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export DLCC_CACHE_DIR=$work/cache

n_deps() { # n_deps ARTIFACT: the plan header's n_deps
  python3 - "$1" <<'PY'
import struct, sys
b = open(sys.argv[1], 'rb').read()
at = b.find(b'DLRTPLAN')
# dlrt_plan_hdr: magic[8], version, hdr_size, total_size, 6 counts, 9 offsets/sizes, entry
# first[2], entry count[2], 4 string fields, then n_deps.
off = 8 + 4 + 4 + 8 + 6 * 4 + 9 * 8 + 2 * 4 + 2 * 4 + 4 * 4
print(struct.unpack_from('<I', b, at + off)[0] if at >= 0 else '?')
PY
}

echo "| Relu nodes | compile wall s | compile CPU s | artifact MB | peak RSS MB | plan deps |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in $sizes; do
  f=$work/chain$n.dlg
  {
    echo "model chain$n"
    echo "input x : float[64]"
    echo "h0 = Relu (x)"
    for ((i = 1; i < n; i++)); do echo "h$i = Relu (h$((i - 1)))"; done
    echo "output h$((n - 1))"
  } >"$f"
  /usr/bin/time -v "$dlcc" compile --no-cache "$f" -o "$work/chain$n.so" 2>"$work/time$n.txt" >/dev/null
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time$n.txt")
  secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
  cpu=$(awk -F': ' '/User time/ {u = $2} /System time/ {s = $2} END {printf "%.2f", u + s}' "$work/time$n.txt")
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$work/time$n.txt")
  size=$(stat -c %s "$work/chain$n.so" | awk '{printf "%.2f", $1 / 1048576}')
  echo "| $n | $secs | $cpu | $size | $rss | $(n_deps "$work/chain$n.so") |"
  rm -f "$work/chain$n.so"
done
