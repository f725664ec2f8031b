#!/usr/bin/env bash
# tests/driver/test_driver_cli.sh — `dlcc compile` and `dlcc run` through the compilation cache:
# -v says "cache miss KEY" then "cache hit KEY" with the same key and identical artifacts,
# --no-cache leaves the cache directory empty, --cache-dir, a damaged cache.db and a cache
# directory that cannot be created each give ONE warning while the command still succeeds; a
# .dlg differing only in hyper-parameter values is a hit whose artifact carries its values.
# usage: test_driver_cli.sh DLCC SOURCE_DIR
# Never touches the user's cache: DLCC_CACHE_DIR points into a fresh temporary directory.
set -u
if [ $# -ne 2 ]; then
  echo "usage: test_driver_cli.sh DLCC SOURCE_DIR" >&2
  exit 2
fi
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
prog=$dlcc
src=$(cd "$2" && pwd)
source "$src/tests/harness/cli_lib.sh"
not_same() { ! cmp -s "$1" "$2"; }

cat >m.dlg <<'DLG'
model small
dim N = 2
input  x : float[N, 3]
param  b : float[3] = zeros
y = Add (x, b)
z = Relu (y)
output z
DLG

# Miss, then hit with the same key and the same bytes.
run_dlcc compile -v m.dlg -o a.so
check "first compile succeeds" test "$rc" -eq 0
check "first compile is a miss" grep -qE '^dlcc: cache miss [0-9a-f]{32} \([0-9]+\.[0-9] ms\)$' "$err"
key1=$(sed -n 's/^dlcc: cache miss \([0-9a-f]*\) .*/\1/p' "$err")
check "miss still prints the target and the output" grep -qF "wrote a.so (" "$err"
run_dlcc compile -v m.dlg -o b.so
check "second compile succeeds" test "$rc" -eq 0
check "second compile is a hit" grep -qE "^dlcc: cache hit $key1 \\([0-9]+\\.[0-9] ms\\)$" "$err"
check "hit and miss give identical artifacts" cmp a.so b.so
check "the cache lives in DLCC_CACHE_DIR" test -f "$DLCC_CACHE_DIR/cache.db"
run_dlcc compile m.dlg -o c.so
check "without -v nothing is printed" test ! -s "$err" -a ! -s "$out"
run_dlcc compile -v -D N=3 m.dlg -o d.so
check "-D gives another key" grep -qE "^dlcc: cache miss [0-9a-f]{32}" "$err"
check "-D key differs" test "$(sed -n 's/^dlcc: cache miss \([0-9a-f]*\) .*/\1/p' "$err")" != "$key1"
run_dlcc compile -v -O2 m.dlg -o e.so
check "-O2 is a miss" grep -qE "^dlcc: cache miss" "$err"
run_dlcc compile -v --cpu x86-64-v2 m.dlg -o f.so
check "--cpu is a miss" grep -qE "^dlcc: cache miss" "$err"

# --no-cache and --cache-dir.
mkdir empty
run_dlcc compile -v --no-cache --cache-dir "$work/empty" m.dlg -o g.so
check "--no-cache succeeds" test "$rc" -eq 0
check "--no-cache says the cache is off" grep -qE "^dlcc: cache off $key1" "$err"
check "--no-cache leaves the cache dir empty" test -z "$(ls -A empty)"
check "--no-cache artifact is the same" cmp a.so g.so
run_dlcc compile -v --cache-dir "$work/other" m.dlg -o h.so
check "--cache-dir: a miss in the new cache" grep -qE "^dlcc: cache miss $key1" "$err"
check "--cache-dir creates the cache there" test -f other/cache.db
run_dlcc compile --cache-dir
check "--cache-dir without a value is a usage error" test "$rc" -eq 2

# dlcc run on a .dlg goes through the cache too.
/usr/bin/python3 -c "import numpy as np; np.save('x.npy', np.array([[-1,2,-3],[4,-5,6]], np.float32))"
run_dlcc run -v m.dlg --in x=x.npy
check "run -v hits the cache" grep -qE "^dlcc: cache hit $key1" "$err"
check "run prints the output" grep -qF "z: float[2, 3] = [0, 2, 0, 4, 0, 6]" "$out"
run_dlcc run --no-cache m.dlg --in x=x.npy
check "run --no-cache works" grep -qF "z: float[2, 3] = [0, 2, 0, 4, 0, 6]" "$out"

# A damaged cache.db: the compile succeeds and warns once.
mkdir -m 700 bad
head -c 8192 /dev/urandom >bad/cache.db
chmod 600 bad/cache.db
run_dlcc compile --cache-dir "$work/bad" m.dlg -o i.so
check "damaged cache.db: compile succeeds" test "$rc" -eq 0
check "damaged cache.db: one warning" test "$(grep -c 'warning:' "$err")" -eq 1
check "damaged cache.db: says it goes on" grep -qF "compiling without it" "$err"
check "damaged cache.db: artifact written" cmp a.so i.so
check "damaged cache.db: file kept" test -s bad/cache.db

# A cache directory that cannot be created (below a regular file, so even root fails).
: >plain
run_dlcc compile -v --cache-dir "$work/plain/cache" m.dlg -o j.so
check "uncreatable cache dir: compile succeeds" test "$rc" -eq 0
check "uncreatable cache dir: one warning" test "$(grep -c 'warning:' "$err")" -eq 1
check "uncreatable cache dir: cache off" grep -qE "^dlcc: cache off $key1" "$err"
DLCC_CACHE_DIR=$work/plain/cache "$dlcc" run m.dlg --in x=x.npy >"$out" 2>"$err"
rc=$?
check "uncreatable cache dir: run succeeds" test "$rc" -eq 0
check "uncreatable cache dir: run warns once" test "$(grep -c 'warning:' "$err")" -eq 1

# A read-only cache directory (only meaningful when not root: root writes anyway).
if [ "$(id -u)" -ne 0 ]; then
  mkdir -m 700 ro && "$dlcc" compile --cache-dir "$work/ro" m.dlg -o k.so 2>/dev/null
  chmod 500 ro ro/cache.db 2>/dev/null
  run_dlcc compile -D N=5 --cache-dir "$work/ro" m.dlg -o k.so
  check "read-only cache dir: compile succeeds" test "$rc" -eq 0
  check "read-only cache dir: at most one warning" test "$(grep -c 'warning:' "$err")" -le 1
  chmod 700 ro
fi

# Hyper-parameter values are not in the key: a file that differs only in lr, betas, eps, the
# clip norm or the loss scale's settings is a cache hit, and the artifact written from that hit
# carries its own values: it trains exactly as a fresh compile of the file does.
hp_model() { # hp_model LR BETA1 BETA2 EPS CLIP INIT
  cat <<DLG
model hp
input  x : float[4, 3]
input  t : float[4, 2]
param  w : float[3, 2] = uniform(-1, 1, seed = 7)
h    = MatMul (x, w)
loss = MeanSquaredError (h, t)
output h
train loss {
  optimizer = adam <lr = $1, beta1 = $2, beta2 = $3, eps = $4>
  clip_norm = $5
  loss_scale = dynamic <init = $6>
}
DLG
}
hp_model 0.01 0.9 0.999 1e-8 1.0 1024 >hpa.dlg
hp_model 0.2 0.5 0.99 1e-4 3.0 64 >hpb.dlg
/usr/bin/python3 -c "
import numpy as np
r = np.random.default_rng(3)
np.save('hx.npy', r.uniform(-1, 1, (4, 3)).astype(np.float32))
np.save('ht.npy', r.uniform(-1, 1, (4, 2)).astype(np.float32))"
run_dlcc compile -v hpa.dlg -o hpa.so
check "hyper-parameters: the first file is a miss" grep -qE "^dlcc: cache miss [0-9a-f]{32}" "$err"
hpkey=$(sed -n 's/^dlcc: cache miss \([0-9a-f]*\) .*/\1/p' "$err")
run_dlcc compile -v hpb.dlg -o hpb.so
check "hyper-parameters: other lr/betas/eps/clip/scale is a cache hit" \
  grep -qE "^dlcc: cache hit $hpkey " "$err"
run_dlcc compile --no-cache hpb.dlg -o hpb_fresh.so
check "hyper-parameters: the hit's artifact equals a fresh compile of its file" cmp hpb.so hpb_fresh.so
check "hyper-parameters: the two files' artifacts differ (their values)" not_same hpa.so hpb.so
for f in hpa.so hpb.so hpb.dlg; do
  "$dlcc" run --no-cache "$f" --entry train_step --steps 4 --in x=hx.npy --in t=ht.npy \
    >"${f%.*}.${f##*.}.steps" 2>/dev/null
done
check "hyper-parameters: four steps each" \
  test "$(cat hpa.so.steps hpb.so.steps hpb.dlg.steps | grep -c '^step [1-4] loss ')" -eq 12
check "hyper-parameters: hpb.so trains as hpb.dlg" cmp hpb.so.steps hpb.dlg.steps
check "hyper-parameters: the first losses agree" \
  test "$(head -1 hpa.so.steps | cut -d' ' -f4)" = "$(head -1 hpb.so.steps | cut -d' ' -f4)"
check "hyper-parameters: another lr gives other losses" not_same hpa.so.steps hpb.so.steps

# A model error is still an error (exit 1), with or without the cache.
printf 'model bad\ninput x : float[2, 3]\ny = MatMul (x, x)\noutput y\n' >bad.dlg
run_dlcc compile bad.dlg -o bad.so
check "model errors exit 1" test "$rc" -eq 1
check "no artifact for a bad model" test ! -e bad.so

finish
