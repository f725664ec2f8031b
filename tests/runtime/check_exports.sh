#!/usr/bin/env bash
# Every symbol libdlrt defines for others must start with dlrt_.
set -euo pipefail
lib=$1
# Sanitizer builds add section markers (__start_asan_globals, ...); they are the toolchain's, not
# our API, and are allowed.
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | grep -v '^dlrt_' |
      grep -Ev '^__(start|stop)_(asan|ubsan|sancov|tsan)' || true)
if [ -n "$bad" ]; then
  echo "FAIL: $lib exports symbols outside dlrt_*:"; echo "$bad"; exit 1
fi
n=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/' | wc -l)
[ "$n" -gt 0 ] || { echo "FAIL: $lib exports nothing"; exit 1; }
echo "ok: $n exported symbols, all dlrt_*"
