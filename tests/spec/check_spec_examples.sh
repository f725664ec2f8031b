#!/usr/bin/env bash
# The examples of the graph format spec (../shared/spec/graph-format.md) must always parse and
# pass shape inference: every fenced block under a "## Example" heading that starts with a
# `model` statement is extracted and given to `dlcc check`. Exits 77 (skipped) when the spec is not beside the checkout.
set -euo pipefail
dlcc=$1
spec=$2
if [ ! -f "$spec" ]; then
  echo "spec not found at $spec: skipped"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
awk -v dir="$dir" '
  /^## / { example = ($0 ~ /^## Example/) }
  /^```/ { if (inblock) { inblock = 0; if (file) close(file); file = "" } else { inblock = 1; first = 1 } next }
  inblock && first { first = 0; if (example && $1 == "model") { n++; file = sprintf("%s/example%d.dlg", dir, n) } }
  inblock && file { print > file }
' "$spec"
n=$(ls "$dir"/*.dlg 2>/dev/null | wc -l)
if [ "$n" -lt 2 ]; then
  echo "FAIL: expected at least 2 model examples in $spec, found $n"
  exit 1
fi
status=0
for f in "$dir"/*.dlg; do
  if "$dlcc" check "$f"; then
    echo "ok: $(head -1 "$f")"
  else
    echo "FAIL: example $(basename "$f") of the spec does not check:"; cat -n "$f"; status=1
  fi
done
exit $status
