# tests/train_cli/lib.sh — shared helpers of the train_cli shell tests (sourced, not run).
# Expects $1 = dlcc, $2 = source dir. Sets $dlcc $src $py $work (a temporary directory that is
# removed on exit and is the current directory), DLCC_CACHE_DIR (a fresh cache inside it), and
# pass/fail/expect/expect_msg/check/run_dlcc. Each case prints "ok" or "FAIL" with the
# command's output; finish prints "N passed, N failed" and sets the exit status.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $(basename "$0") DLCC SOURCE_DIR" >&2
  exit 2
fi
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export DLCC_CACHE_DIR=$work/cache

passed=0
failed=0
out=$work/.stdout
err=$work/.stderr

pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL $1"
  echo "  --- stdout:"; head -40 "$out" | sed 's/^/  /'
  echo "  --- stderr:"; head -40 "$err" | sed 's/^/  /'
}

run_dlcc() {
  "$dlcc" "$@" >"$out" 2>"$err"
  rc=$?
}

# expect RC NAME ARGS...: dlcc ARGS exits with RC.
expect() {
  local want=$1 name=$2
  shift 2
  run_dlcc "$@"
  if [ "$rc" -eq "$want" ]; then pass "$name"; else echo "  exit $rc, wanted $want"; fail "$name"; fi
}

# expect_msg RC NAME TEXT ARGS...: exits with RC and stderr contains TEXT (fixed string).
expect_msg() {
  local want=$1 name=$2 text=$3
  shift 3
  run_dlcc "$@"
  if [ "$rc" -eq "$want" ] && grep -qF -- "$text" "$err"; then
    pass "$name"
  else
    echo "  exit $rc (wanted $want), stderr should contain: $text"
    fail "$name"
  fi
}

check() { # check NAME COMMAND...: a shell condition
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}

finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}
