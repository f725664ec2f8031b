#!/usr/bin/env bash
# tests/cli/test_limits.sh — inputs dlcc must refuse quickly instead of hanging or allocating
# without bound: files that are not regular files (/dev/zero, a FIFO without a writer, a
# directory) given to check, import, run's --in and run itself; a .dlg over the 64 MiB read limit
# (a sparse file); shapes over the 1 TiB tensor limit and a const over the 256 MiB limit, refused
# by `dlcc compile` before anything is materialised (under a 4 GiB address-space limit, so the
# old 8 GB allocation cannot pass); -D dims over 2^40. Every dlcc call runs under `timeout` only
# as a hang guard (a hang is a failure, not a slow pass). usage: test_limits.sh DLCC SOURCE_DIR
set -u
if [ $# -ne 2 ]; then
  echo "usage: test_limits.sh DLCC SOURCE_DIR" >&2
  exit 2
fi
prog=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
source "$src/tests/harness/cli_lib.sh"

# A hang (or an unbounded read) must fail the case, not the whole suite: 60 s is far beyond the
# milliseconds these refusals take.
run_dlcc() {
  timeout 60 "$prog" "$@" >"$out" 2>"$err"
  rc=$?
}

cat >m.dlg <<'DLG'
model m
input x : float[2]
y = Relu (x)
output y
DLG
mkfifo fifo

# ---------------------------------------------------------------------------------------------
# Not regular files

expect_msg 1 "check /dev/zero" "cannot read '/dev/zero': not a regular file" check /dev/zero
expect_msg 1 "check a FIFO without a writer" "cannot read 'fifo': not a regular file" check fifo
expect_msg 1 "check a directory" "cannot read '$work': is a directory" check "$work"
expect_msg 1 "fmt /dev/zero" "not a regular file" fmt /dev/zero
expect_msg 1 "compile a FIFO" "not a regular file" compile fifo -o fifo.so
check "compile a FIFO writes nothing" test ! -e fifo.so
expect_msg 1 "run a FIFO" "not a regular file" run --backend ref fifo
run_dlcc import /dev/zero -o z.dlg
check "import /dev/zero fails" test "$rc" -ne 0 -a "$rc" -ne 124
check "import /dev/zero says it cannot read it" grep -qF "cannot read /dev/zero: not a regular file" "$err"
check "import /dev/zero writes nothing" test ! -e z.dlg
expect_msg 1 "import a FIFO" "cannot read fifo: not a regular file" import fifo -o z.dlg
# Over DL_READ_LIMIT_ONNX (2 GiB): refused before reading (sparse).
truncate -s 2049M huge.onnx
expect_msg 1 "import a 2049 MiB .onnx" \
  "cannot read huge.onnx: file is 2148532224 bytes, more than the limit of 2147483648 bytes" \
  import huge.onnx -o z.dlg
rm -f huge.onnx
expect_msg 1 "run --in /dev/zero" "cannot read" run --backend ref m.dlg --in x=/dev/zero
expect_msg 1 "run --in /dev/zero says why" "not a regular file" run --backend ref m.dlg --in x=/dev/zero
expect_msg 1 "run --in a FIFO" "cannot read" run --backend ref m.dlg --in x=fifo
expect_msg 1 "run --in a FIFO says why" "not a regular file" run --backend ref m.dlg --in x=fifo
expect_msg 1 "run --in a directory" "cannot read" run --backend ref m.dlg --in "x=$work"
# A file(...) initialiser naming a FIFO or a device: refused, never waited on.
cat >fileinit.dlg <<'DLG'
model fileinit
input x : float[2]
param w : float[2] = file("fifo", "w")
y = Mul (x, w)
output y
DLG
expect_msg 1 "a file(...) initialiser naming a FIFO" "not a regular file" \
  compile fileinit.dlg -o fileinit.so
check "a file(...) initialiser naming a FIFO writes nothing" test ! -e fileinit.so
sed 's|"fifo"|"/dev/zero"|' fileinit.dlg >fileinit0.dlg
/usr/bin/python3 -c 'import numpy as np; np.save("x2.npy", np.zeros(2, np.float32))' 
expect_msg 1 "a file(...) initialiser naming /dev/zero" "not a regular file" \
  run --backend ref fileinit0.dlg --in x=x2.npy

# A .dlg over DL_READ_LIMIT_DLG (64 MiB) is refused before it is read (sparse: no disk used).
truncate -s 65M huge.dlg
expect_msg 1 "check a 65 MiB .dlg" \
  "cannot read 'huge.dlg': file is 68157440 bytes, more than the limit of 67108864 bytes" \
  check huge.dlg

# ---------------------------------------------------------------------------------------------
# Size limits at check / compile time

cat >bomb.dlg <<'DLG'
model bomb
const c : float[2000000000] = 1.5
input x : float[1]
y = Add (x, c)
output y
DLG
# 100 bytes that used to make the compiler materialise 8 GB: refused by the check, under a
# 4 GiB allocation cap so the old allocation would fail the case rather than pass slowly. A
# sanitizer build reserves terabytes of shadow memory, so there the cap is the sanitizer's own
# max_allocation_size_mb instead of ulimit -v.
if grep -qa -e __asan_init -e __tsan_init "$prog"; then
  run_limited() {
    local cap=max_allocation_size_mb=4096
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}$cap TSAN_OPTIONS=${TSAN_OPTIONS:+$TSAN_OPTIONS:}$cap \
      timeout 60 "$prog" "$@" >"$out" 2>"$err"
    rc=$?
  }
else
  run_limited() { # run_limited ARGS...: run_dlcc with ulimit -v 4 GiB
    (ulimit -v 4194304 && timeout 60 "$prog" "$@") >"$out" 2>"$err"
    rc=$?
  }
fi
run_limited compile bomb.dlg -o bomb.so
check "compile a 100-byte const bomb fails with exit 1" test "$rc" -eq 1
check "the const bomb is a located error" grep -qF \
  "bomb.dlg:2:11: error: const 'c': float[2000000000] is too large" "$err"
check "the const bomb writes nothing" test ! -e bomb.so
run_limited run --backend ref bomb.dlg --in x=/dev/null
check "run --backend ref refuses the const bomb" grep -qF "is too large" "$err"

cat >big.dlg <<'DLG'
model big
input x : float[99999999999, 99999999999]
y = Relu (x)
output y
DLG
expect_msg 1 "check an overflowing input shape" \
  "big.dlg:2:11: error: input 'x': float[99999999999, 99999999999] is too large: its size overflows int64" \
  check big.dlg
run_limited compile big.dlg -o big.so
check "compile an overflowing input shape fails with exit 1" test "$rc" -eq 1
check "compile an overflowing input shape writes nothing" test ! -e big.so

cat >n.dlg <<'DLG'
model n
dim N = 8
input x : float[N, 1024]
y = Relu (x)
output y
DLG
expect_msg 1 "-D N beyond 2^40" "-D N=99999999999999: a dim must be at most 1099511627776 (2^40)" \
  compile n.dlg -D N=99999999999999 -o n.so
expect_msg 1 "-D N making x too large" "n.dlg:3:7: error: input 'x': float[1099511627776, 1024] is too large" \
  compile n.dlg -D N=1099511627776 -o n.so
check "-D failures write nothing" test ! -e n.so
expect 0 "-D N within the limits still compiles" compile n.dlg -D N=16 -o n.so

finish
