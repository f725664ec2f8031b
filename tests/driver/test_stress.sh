#!/usr/bin/env bash
# tests/driver/test_stress.sh — many processes on one fresh cache: 8 processes x 20 `dlcc
# compile` runs over 4 different small graphs. Every run must exit 0; afterwards the database
# must pass PRAGMA integrity_check and hold exactly 4 entries (checked with /usr/bin/python3's
# sqlite3 module, so the test needs neither the sqlite3 CLI nor dlcc-cache).
# usage: test_stress.sh DLCC
set -u
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export DLCC_CACHE_DIR=$work/cache
for g in 0 1 2 3; do
  cat >g$g.dlg <<DLG
model g$g
dim N = $((g + 2))
input  x : float[N, 4]
y = Relu (x)
output y
DLG
done
t0=$(date +%s)
for p in 0 1 2 3 4 5 6 7; do
  (
    fails=0
    for i in $(seq 0 19); do
      g=$(((p + i) % 4))
      "$dlcc" compile g$g.dlg -o out-$p-$i.so 2>>err-$p.txt || fails=$((fails + 1))
      rm -f out-$p-$i.so
    done
    echo "$fails" >fails-$p.txt
  ) &
done
wait
failures=$(cat fails-*.txt | awk '{s += $1} END {print s}')
warnings=$(cat err-*.txt | grep -c 'warning:')
read -r entries integrity < <(/usr/bin/python3 - "$DLCC_CACHE_DIR/cache.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
name = "entries"
n = db.execute("select count(*) from %s" % name).fetchone()[0]
ok = db.execute("pragma integrity_check").fetchone()[0]
print(n, "ok" if ok == "ok" else "FAILED")
PY
)
echo "stress: 160 compiles, $failures failures, $entries entries, integrity $integrity" \
  "($warnings cache warnings, $(($(date +%s) - t0)) s)"
if [ "$warnings" -gt 0 ]; then cat err-*.txt | sort | uniq -c | head; fi
[ "$failures" -eq 0 ] && [ "$entries" -eq 4 ] && [ "$integrity" = ok ]
