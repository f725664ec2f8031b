# tests/train_cli/lib.sh — the arguments of the train_cli shell tests (sourced, not run):
# $1 = the program under test (dlcc, or the C trainer sample), $2 = the source dir. Sets $dlcc
# (= $prog) and $src, then sources the shell test harness tests/harness/cli_lib.sh.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $(basename "$0") PROGRAM SOURCE_DIR" >&2
  exit 2
fi
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
prog=$dlcc
src=$(cd "$2" && pwd)
source "$src/tests/harness/cli_lib.sh"
