#!/usr/bin/env bash
# Every tracked C source and header follows .clang-format (STYLE.md 3.10; clang-format >= 15).
# Exits 77 (skipped) when clang-format-19 is not installed or this is not a git checkout.
set -uo pipefail
cd "$1"
cf=$(command -v clang-format-19 || true)
if [ -z "$cf" ] || ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "clang-format-19 or git checkout not available: skipped"
  exit 77
fi
mapfile -t files < <(git ls-files '*.c' '*.h')
if ! out=$("$cf" --dry-run -Werror "${files[@]}" 2>&1); then
  printf '%s\n' "$out" | head -40
  echo "FAIL: not formatted; run: clang-format-19 -i \$(git ls-files '*.c' '*.h')"
  exit 1
fi
echo "ok: ${#files[@]} files formatted"
