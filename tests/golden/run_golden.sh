#!/usr/bin/env bash
# tests/golden/run_golden.sh — runs one golden test: DLCC FILE.dlg.
#
# The first line of FILE.dlg is its command, "# RUN: dlcc ARGS..." where %s stands for the file.
# The command runs from the file's directory with the bare file name (so paths in diagnostics are
# stable) and its stderr, followed by a final line "exit: N", must equal FILE.expected byte for
# byte. On a mismatch the unified diff is printed. With DL_UPDATE_GOLDEN=1 the .expected file is
# rewritten instead (review the diff before committing it). Words in the command are split on
# spaces; quoting is not supported (golden commands do not need it).
set -u
if [ $# -ne 2 ]; then
  echo "usage: run_golden.sh DLCC FILE.dlg" >&2
  exit 2
fi
dlcc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
file=$2
dir=$(dirname "$file")
base=$(basename "$file")
expected=${file%.dlg}.expected

line=$(head -n 1 "$file")
case "$line" in
  "# RUN: dlcc "*) ;;
  *) echo "$file:1: first line must be '# RUN: dlcc ARGS... %s'" >&2; exit 1 ;;
esac
read -r -a words <<<"${line#"# RUN: "}"
args=()
for w in "${words[@]:1}"; do
  args+=("${w//%s/$base}")
done

actual=$(mktemp)
trap 'rm -f "$actual"' EXIT
(cd "$dir" && exec "$dlcc" "${args[@]}" 2>"$actual" >/dev/null)
rc=$?
echo "exit: $rc" >>"$actual"
if [ "$rc" -gt 2 ]; then
  echo "FAIL $base: dlcc exited with $rc (crash or internal error)" >&2
  cat "$actual" >&2
  exit 1
fi

if [ "${DL_UPDATE_GOLDEN:-0}" = 1 ]; then
  if ! cmp -s "$actual" "$expected"; then
    cp "$actual" "$expected"
    echo "updated $expected"
  fi
  exit 0
fi
if [ ! -f "$expected" ]; then
  echo "FAIL $base: $expected is missing (create it with DL_UPDATE_GOLDEN=1)" >&2
  cat "$actual" >&2
  exit 1
fi
if ! diff -u --label "$expected" --label "actual" "$expected" "$actual"; then
  echo "FAIL $base: stderr differs from $expected (DL_UPDATE_GOLDEN=1 to accept)" >&2
  exit 1
fi
echo "ok   $base"
