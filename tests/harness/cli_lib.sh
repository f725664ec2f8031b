# tests/harness/cli_lib.sh — the harness of the shell tests (sourced, not run). Before sourcing,
# set $prog to the program under test (an absolute path). Provides: $py (/usr/bin/python3, which
# has numpy), $work (a private temporary directory, the current directory, removed on exit),
# DLCC_CACHE_DIR and TMPDIR inside it (a test never sees the user's cache or leaves files in
# /tmp), and the cases: run_dlcc (runs $prog, capturing stdout/stderr in $out/$err, sets $rc;
# a script may redefine it), expect, expect_msg, check, pass/fail. Each case prints "ok" or
# "FAIL" with the command's output; finish prints "N passed, N failed" and sets the exit status.
set -u
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export DLCC_CACHE_DIR=$work/cache TMPDIR=$work/tmp
unset XDG_CACHE_HOME DLCC_CACHE_MAX_SIZE
mkdir "$TMPDIR"

passed=0
failed=0
out=$work/.stdout
err=$work/.stderr
: >"$out"
: >"$err"

pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL $1"
  echo "  --- stdout:"; head -60 "$out" | sed 's/^/  /'
  echo "  --- stderr:"; head -60 "$err" | sed 's/^/  /'
}

run_dlcc() { # run_dlcc ARGS...: runs $prog, capturing stdout/stderr; sets $rc.
  "$prog" "$@" >"$out" 2>"$err"
  rc=$?
}

expect() { # expect RC NAME ARGS...: $prog ARGS exits with RC.
  local want=$1 name=$2
  shift 2
  run_dlcc "$@"
  if [ "$rc" -eq "$want" ]; then pass "$name"; else echo "  exit $rc, wanted $want"; fail "$name"; fi
}

expect_msg() { # expect_msg RC NAME TEXT ARGS...: exits with RC and stderr contains TEXT.
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
