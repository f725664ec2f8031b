#!/usr/bin/env bash
# tests/man/test_man_render.sh — every manual page in man/ renders without a warning: groff's
# man macros with every warning on (-ww: bad macros, escapes, fonts, lines that cannot be broken,
# ...) and, where mandoc is installed, its linter at level "warning"; the rendered text has the
# page's NAME line and fits an 80-column terminal. Skipped (77) without groff (Debian's
# groff-base; tools/setup.sh --test installs it and mandoc).
# usage: test_man_render.sh SOURCE_DIR
set -u
src=$(cd "$1" && pwd)
prog=/bin/true
source "$src/tests/harness/cli_lib.sh"
if ! command -v groff >/dev/null 2>&1; then
  echo "skip: groff is not installed (apt-get install groff-base, or bash tools/setup.sh --test)"
  exit 77
fi
pages=("$src"/man/*.[1-8])
check "man/ holds the pages (dlcc.1, dlcc-cache.1, dlcc-graph.5)" \
  test -f "$src/man/dlcc.1" -a -f "$src/man/dlcc-cache.1" -a -f "$src/man/dlcc-graph.5"
for page in "${pages[@]}"; do
  name=$(basename "$page")
  LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" >"$out" 2>"$err"
  rc=$?
  check "$name: groff -man -ww renders it without a warning" test "$rc" -eq 0 -a ! -s "$err"
  # The text a terminal shows (man's own width: 78 columns of text in an 80-column window).
  LC_ALL=C.UTF-8 groff -man -Tutf8 -P-c -P-b -P-u "$page" >"$name.txt" 2>/dev/null
  section=${name##*.}
  title=${name%.*}
  check "$name: the NAME line '$title - ...' is there" grep -qE "^ +$title - [a-z]" "$name.txt"
  check "$name: more than 40 lines of text" test "$(wc -l <"$name.txt")" -gt 40
  check "$name: no line wider than 80 columns" \
    test "$(LC_ALL=C.UTF-8 wc -L <"$name.txt")" -le 80
  check "$name: the header names section $section" \
    grep -qiE "^${title}\\($section\\) .* ${title}\\($section\\)\$" "$name.txt"
  if command -v mandoc >/dev/null 2>&1; then
    mandoc -Tlint -Wwarning "$page" >"$out" 2>"$err"
    rc=$?
    check "$name: mandoc -Tlint finds no warning" test "$rc" -eq 0 -a ! -s "$out" -a ! -s "$err"
  else
    echo "skip: mandoc -Tlint for $name (mandoc is not installed)"
  fi
done
finish
