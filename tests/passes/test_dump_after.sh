#!/usr/bin/env bash
# tests/passes/test_dump_after.sh — `dlcc compile --dump-after` on every sample: the IR after each
# pass of the pipeline (passes/pipeline.c) is .dlg text that `dlcc check --verify-each` accepts,
# `--dump-after=all` is the single dumps one after another, fusion changes the text only by its
# comment lines naming the groups (the transformer block has three), the back-end passes leave the IR as they got it, dumps do not change the artifact, and
# an unknown pass is a usage error.
# usage: test_dump_after.sh DLCC SOURCE_DIR
set -u
if [ $# -ne 2 ]; then
  echo "usage: test_dump_after.sh DLCC SOURCE_DIR" >&2
  exit 2
fi
prog=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
source "$src/tests/harness/cli_lib.sh"

passes="shapes autodiff precision simplify fusion memplan schedule"
body() { tail -n +2 "$1" | grep -v '^# fusion: '; }
for f in "$src"/samples/*.dlg; do
  b=$(basename "$f" .dlg)
  run_dlcc compile "$f" --no-cache -o "$b.ref.so"
  check "$b: compiles" [ "$rc" -eq 0 ]
  run_dlcc compile "$f" --no-cache --verify-each --dump-after=all -o "$b.all.so"
  check "$b: --dump-after=all runs" [ "$rc" -eq 0 ]
  check "$b: a dump leaves the artifact as it is" cmp -s "$b.ref.so" "$b.all.so"
  cp "$out" "$b.all"
  # One file per dump, named by the pass in its header.
  awk -v b="$b" '/^# dlcc: IR after / { f = b "." $5 ".dlg" } { print > f }' "$b.all"
  for p in $passes; do
    check "$b: there is a dump after $p" [ -f "$b.$p.dlg" ]
    check "$b: the dump after $p has one model" [ "$(grep -c '^model ' "$b.$p.dlg")" -eq 1 ]
    run_dlcc check --verify-each "$b.$p.dlg"
    check "$b: dlcc check reads back the dump after $p" [ "$rc" -eq 0 ]
  done
  check "$b: fusion changes nothing but comments" \
    cmp -s <(body "$b.simplify.dlg") <(body "$b.fusion.dlg")
  check "$b: memplan leaves the IR unchanged" cmp -s <(body "$b.fusion.dlg") <(body "$b.memplan.dlg")
  check "$b: schedule leaves the IR unchanged" cmp -s <(body "$b.fusion.dlg") <(body "$b.schedule.dlg")
done
# One pass at a time gives the same dumps as 'all' (on one sample: each is a full compile).
: >concat
for p in $passes; do
  run_dlcc compile "$src/samples/mlp_fmnist.dlg" --no-cache --dump-after="$p" -o "one.$p.so"
  check "--dump-after=$p runs" [ "$rc" -eq 0 ]
  check "--dump-after=$p dumps once" [ "$(grep -c '^# dlcc: IR after' "$out")" -eq 1 ]
  check "--dump-after=$p dumps after $p" grep -q "^# dlcc: IR after $p (" "$out"
  cat "$out" >>concat
done
check "--dump-after=all is every single dump in pipeline order" cmp -s concat mlp_fmnist.all
check "transformer_block: the dump after fusion names its three groups" \
  [ "$(grep -c '^# fusion: .* = one kernel: ' transformer_block.fusion.dlg)" -eq 3 ]
check "transformer_block: the scaled scores are their product's epilogue" \
  grep -q '^# fusion: ss = one kernel: MatMul s, Mul ss$' transformer_block.fusion.dlg
check "transformer_block: the groups stay in the dumps after fusion" \
  [ "$(grep -c '^# fusion: ' transformer_block.schedule.dlg)" -eq 3 ]
check "mlp_fmnist: Gemm and Relu share a kernel, in training too" \
  grep -q '^# fusion: a = one kernel: Gemm h, Relu a$' mlp_fmnist.fusion.dlg
# The training graph is in the dump after autodiff: the gradient ops are printed and read back.
check "mlp_fmnist: the dump after autodiff holds gradient ops" \
  grep -qE '= (UnaryGrad|SoftmaxCrossEntropyLossGrad) ' mlp_fmnist.autodiff.dlg
expect_msg 2 "--dump-after of an unknown pass is a usage error" \
  "--dump-after expects all or a pass (shapes, autodiff" compile "$src/samples/mlp_fmnist.dlg" \
  --no-cache --dump-after=lowering
expect 0 "--verify-each compiles" compile "$src/samples/mlp_fmnist.dlg" --no-cache --verify-each \
  -o v.so
check "--verify-each leaves the artifact as it is" cmp -s v.so mlp_fmnist.ref.so
expect 0 "dlcc check --verify-each" check --verify-each "$src"/samples/*.dlg
finish
