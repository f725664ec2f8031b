#!/usr/bin/env bash
# tests/cache_tool/test_cache_controls.sh — the cache controls ccache, JAX and torch.compile
# users look for, run as a user would: DLCC_CACHE=0 (no lookup, nothing stored, -v says why),
# DLCC_CACHE_READONLY=1 (a hit is served, a miss compiled and not stored, -v says read-only and
# why; dlcc-cache write commands refuse with the reason), a cache directory made read-only with
# chmod (skipped with a note when running as root, where chmod does not stop writes: the store
# test cache_store_controls covers it as uid 65534), `ls` with each entry's source file and dims,
# `stats -z` / `-z`, and `-M 0` / `config max-size 0` / `prune --max-size 0` as "no limit".
# usage: test_cache_controls.sh DLCC_CACHE_TOOL DLCC
set -u
if [ $# -ne 2 ]; then
  echo "usage: test_cache_controls.sh DLCC_CACHE_TOOL DLCC" >&2
  exit 2
fi
tool=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
dlcc=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
prog=$tool
source "$(cd "$(dirname "$0")/../harness" && pwd)/cli_lib.sh"
has() { grep -q -- "$1" "$2"; }
entries() { "$tool" ls --json | "$py" -c 'import json,sys; print(len(json.load(sys.stdin)["entries"]))'; }
compile() { # compile ARGS...: dlcc compile -v, output in $out/$err, status in $rc
  "$dlcc" compile -v "$@" >"$out" 2>"$err"
  rc=$?
}

cat >pool.dlg <<'EOF'
model pool
dim N = 2
input x : float[N, 1, 6, 6]
r = Relu (x)
p = MaxPool <kernel_shape = [2, 2]> (r)
output p
EOF

# --- DLCC_CACHE=0 ------------------------------------------------------------------------------
DLCC_CACHE=0 compile pool.dlg -o a.so
check "DLCC_CACHE=0: compiles" test "$rc" -eq 0
check "DLCC_CACHE=0: -v says cache off" has "dlcc: cache off" "$err"
check "DLCC_CACHE=0: -v says why" has "the cache is disabled by DLCC_CACHE=0" "$err"
check "DLCC_CACHE=0: no cache was created" test ! -e "$DLCC_CACHE_DIR/cache.db"

# --- a normal compile fills the cache; ls shows source and dims --------------------------------
compile pool.dlg -o a.so
check "first compile is a miss" has "dlcc: cache miss" "$err"
expect 0 "ls" ls
check "ls header has SOURCE and DIMS" grep -Eq '^KEY +MODEL +SOURCE +DIMS +TARGET +SIZE +HITS' "$out"
check "ls shows the source file's absolute path" has "$work/pool.dlg" "$out"
check "ls shows the bound dims" grep -Eq "pool +$work/pool.dlg +N=2 " "$out"
expect 0 "ls --json" ls --json
check "ls --json has source and dims" "$py" -c '
import json,sys
e = json.load(open(sys.argv[1]))["entries"][0]
sys.exit(0 if e["source"] == sys.argv[2] and e["dims"] == "N=2" else 1)' "$out" "$work/pool.dlg"
"$dlcc" compile -D N=3 pool.dlg -o b.so >/dev/null 2>&1
expect 0 "ls after -D N=3" ls
check "ls shows N=3 for the -D compile" has "N=3" "$out"
# The -D N=3 entry by its dims: both entries may be used within the same second, and ls breaks
# such ties by key, which changes with the compiler's sources (the build id is in the key).
expect 0 "show" show "$("$tool" ls --json | "$py" -c 'import json,sys; print([e for e in json.load(sys.stdin)["entries"] if e["dims"] == "N=3"][0]["key"][:8])')"
check "show has source and dims" bash -c "grep -q '^source: *$work/pool.dlg' '$out' && grep -q '^dims: *N=3' '$out'"

# --- DLCC_CACHE_READONLY=1 ---------------------------------------------------------------------
n0=$(entries)
DLCC_CACHE_READONLY=1 compile pool.dlg -o a.so
check "read-only: compiles" test "$rc" -eq 0
check "read-only: a hit is served" has "dlcc: cache hit" "$err"
check "read-only: -v says read-only and why" \
  has "the cache is read-only (DLCC_CACHE_READONLY=1): hits are used, a miss is compiled but not stored" "$err"
DLCC_CACHE_READONLY=1 compile -O1 pool.dlg -o c.so
check "read-only: a miss compiles" bash -c "[ $rc -eq 0 ] && grep -q 'dlcc: cache miss' '$err'"
check "read-only: the miss was not stored" test "$(entries)" -eq "$n0"
check "read-only: no warning for a normal read-only run" bash -c "! grep -q '^warning' '$err'"
DLCC_CACHE_READONLY=1 "$tool" clear >"$out" 2>"$err"
rc=$?
check "read-only: dlcc-cache clear refuses with the reason" \
  bash -c "[ $rc -eq 1 ] && grep -q 'the cache is read-only (DLCC_CACHE_READONLY=1)' '$err'"
check "read-only: clear removed nothing" test "$(entries)" -eq "$n0"
DLCC_CACHE_READONLY=1 "$tool" stats >"$out" 2>"$err"
check "read-only: stats says so" has "read-only: *DLCC_CACHE_READONLY=1" "$out"

# --- a cache directory made read-only with chmod -----------------------------------------------
if [ "$(id -u)" -eq 0 ]; then
  echo "skip: the chmod case: running as root, where chmod 500 does not stop writes (DLCC_CACHE_READONLY is tested above; cache_store_controls runs the chmod cases as uid 65534)"
else
  chmod 500 "$DLCC_CACHE_DIR"
  compile pool.dlg -o a.so
  check "chmod 500: a hit is served" has "dlcc: cache hit" "$err"
  check "chmod 500: -v says the directory is not writable" \
    has "the cache is read-only (the cache directory $DLCC_CACHE_DIR is not writable" "$err"
  compile -O1 pool.dlg -o c.so
  check "chmod 500: a miss compiles, not stored" bash -c "[ $rc -eq 0 ] && [ $(entries) -eq $n0 ]"
  chmod 700 "$DLCC_CACHE_DIR"
fi

# --- stats -z ----------------------------------------------------------------------------------
compile pool.dlg -o a.so # a hit, counted
expect 0 "stats" stats
check "stats counted hits" grep -Eq '^hits: +[1-9]' "$out"
expect 0 "stats -z" stats -z
check "stats -z says zeroed" has "statistics zeroed" "$out"
expect 0 "stats after -z" stats
check "hits and misses are zero" bash -c "grep -Eq '^hits: +0$' '$out' && grep -Eq '^misses: +0$' '$out'"
check "the entries are kept" grep -Eq "^entries: +$n0$" "$out"
compile pool.dlg -o a.so
expect 0 "dlcc-cache -z (ccache's spelling)" -z
expect 0 "stats after -z" stats
check "-z zeroed the hit" grep -Eq '^hits: +0$' "$out"
expect 2 "stats -z --json is a usage error" stats -z --json

# --- no size limit -----------------------------------------------------------------------------
expect 0 "-M 0" -M 0
check "-M 0 says no limit" has "max-size set to no limit" "$out"
expect 0 "config max-size" config max-size
check "config max-size shows no limit" has "max-size: no limit" "$out"
expect 0 "stats" stats
check "stats shows no limit" grep -Eq '^size limit: +no limit' "$out"
expect 0 "stats --json" stats --json
check "stats --json max_size is 0 (no limit)" "$py" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["max_size"] == 0 else 1)' "$out"
expect 0 "prune --max-size 0 (no size limit)" prune --max-size 0
check "prune --max-size 0 removes nothing" bash -c "grep -q 'removed 0 entries' '$out' && [ $(entries) -eq $n0 ]"
DLCC_CACHE_MAX_SIZE=0 compile -O2 pool.dlg -o d.so
check "DLCC_CACHE_MAX_SIZE=0 keeps every entry" test "$(entries)" -eq $((n0 + 1))
expect 0 "-M 1G" -M 1G
check "-M 1G sets a limit" has "max-size set to 1.0 GiB" "$out"
expect 2 "-M without a size" -M
expect 2 "-M with a bad size" -M lots

finish
