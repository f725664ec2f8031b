#!/usr/bin/env bash
# tests/onnx/test_torch_export.sh — what PyTorch 1.13's torch.onnx.export writes imports and
# computes what torch computes: nn.TransformerEncoderLayer with static shapes and with a dynamic
# batch axis (Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains folded at import, the
# batch a named dim), run by `dlcc run` on the cpu backend and the reference evaluator at batch
# sizes other than the export's. Tolerance from float32 rounding: |got - torch| <= K * 2^-23 *
# (1 + |torch|), K the length of the longest sum on the path (a 128-wide matmul, LayerNorm over
# 64) times 4. Also, without torch (onnx only): shape computations that depend on a named dim in
# a way the graph format cannot say are refused, naming the dim. Exit 77 without onnx.
# usage: test_torch_export.sh DLCC SOURCE_DIR
set -u
if [ $# -ne 2 ]; then
  echo "usage: test_torch_export.sh DLCC SOURCE_DIR" >&2
  exit 2
fi
prog=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
source "$src/tests/harness/cli_lib.sh"

if ! "$py" -c 'import onnx, numpy' 2>/dev/null; then
  echo "skip: onnx is not available to $py"
  exit 77
fi

# close GOT WANT K: the float32 tolerance above.
close() {
  "$py" -c "
import sys, numpy as np
a, b, k = np.load('$1'), np.load('$2'), float('$3')
if a.shape != b.shape:
    print('shape', a.shape, 'vs', b.shape); sys.exit(1)
err = np.abs(a.astype(np.float64) - b) / (1 + np.abs(b))
print('max scaled error %.3g, bound %.3g' % (err.max(), k * 2.0**-23))
sys.exit(not err.max() <= k * 2.0**-23)"
}

# Shape computations on a named dim that cannot be folded (onnx.helper models).
"$py" - <<'PYEOF'
import onnx
from onnx import helper, TensorProto as T
def model(name, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), name + ".onnx")
x = helper.make_tensor_value_info("x", T.FLOAT, ["batch", 4])
zero = helper.make_tensor("zero", T.INT64, [], [0])
# The batch size used as a tensor: x * float(batch).
model("size_as_tensor", [helper.make_node("Shape", ["x"], ["s"]),
                         helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
                         helper.make_node("Cast", ["b"], ["bf"], to=T.FLOAT),
                         helper.make_node("Mul", ["x", "bf"], ["y"])],
      [x], [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 4])], [zero])
# Flattened, the batch loses its name: Shape of the flat tensor is 4 * batch, literal at import.
m1 = helper.make_tensor("m1", T.INT64, [1], [-1])
model("lost_dim", [helper.make_node("Reshape", ["x", "m1"], ["f"]),
                   helper.make_node("Shape", ["f"], ["s"]),
                   helper.make_node("Relu", ["x"], ["r"]),
                   helper.make_node("Reshape", ["r", "s"], ["y"])],
      [x], [helper.make_tensor_value_info("y", T.FLOAT, [None])], [m1])
# Static shapes fold whatever the chain: Shape, Gather, Mul, Concat, ConstantOfShape, Expand.
xs = helper.make_tensor_value_info("x", T.FLOAT, [2, 3])
two = helper.make_tensor("two", T.INT64, [1], [2])
one = helper.make_tensor("one", T.INT64, [1], [1])
model("static_chain", [helper.make_node("Shape", ["x"], ["s"]),
                       helper.make_node("Mul", ["s", "two"], ["s2"]),
                       helper.make_node("Concat", ["one", "s2"], ["c"], axis=0),
                       helper.make_node("ConstantOfShape", ["c"], ["z"],
                                        value=helper.make_tensor("v", T.FLOAT, [1], [0.5])),
                       helper.make_node("Reshape", ["z", "s2"], ["y"])],
      [xs], [helper.make_tensor_value_info("y", T.FLOAT, [4, 6])], [two, one])
PYEOF
expect_msg 1 "a batch size used as a tensor is refused, naming the dim" \
  "'bf' is computed from the size of batch and used as a tensor" import size_as_tensor.onnx
expect_msg 1 "a dim that lost its name is caught by the second import" \
  "a shape computation depends on the size of a named dim (batch) in a way that cannot be folded" \
  import lost_dim.onnx
expect 0 "a static Shape/Mul/Concat/ConstantOfShape chain folds" import static_chain.onnx \
  -o chain.dlg
check "... to a constant-free Expand" grep -qF 'Expand <shape = [1, 4, 6]>' chain.dlg

if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "note: torch is not available to $py, the torch exports are skipped"
  finish
fi

"$py" - <<'PYEOF' 2>/dev/null
import numpy as np, torch
torch.manual_seed(0)
enc = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0,
                                       batch_first=True).eval()
x = torch.randn(2, 5, 64)
torch.onnx.export(enc, x, "enc.onnx", opset_version=17, input_names=["x"], output_names=["y"])
torch.onnx.export(enc, x, "enc_dyn.onnx", opset_version=17, input_names=["x"],
                  output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
torch.onnx.export(enc, x, "enc14.onnx", input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})  # the default opset, 14
with torch.no_grad():
    for n in (1, 2, 3):
        xb = torch.randn(n, 5, 64)
        np.save("x%d.npy" % n, xb.numpy())
        np.save("y%d_torch.npy" % n, enc(xb).numpy())
PYEOF

expect 0 "TransformerEncoderLayer, static shapes, imports" import enc.onnx -o enc.dlg
check "... with no Shape left" bash -c '! grep -q Shape enc.dlg'
expect 0 "... runs on the cpu backend" run enc.dlg --in x=x2.npy --out y=enc_y2.npy
check "... computing what torch computes" close enc_y2.npy y2_torch.npy 512

expect 0 "TransformerEncoderLayer with a dynamic batch imports" import enc_dyn.onnx -o enc_dyn.dlg
check "... the batch is a named dim" grep -qE '^input +x +: float\[batch, 5, 64\]$' enc_dyn.dlg
check "... reshapes keep it or infer it" grep -qF 'shape = [5, batch, 64]' enc_dyn.dlg
for n in 1 3; do
  expect 0 "... runs at batch $n (cpu)" run enc_dyn.dlg -D batch=$n --in x=x$n.npy \
    --out y=dyn_y$n.npy
  check "... computing what torch computes" close dyn_y$n.npy y${n}_torch.npy 512
done
expect 0 "... and at batch 3 on the reference evaluator" run enc_dyn.dlg --backend ref \
  -D batch=3 --in x=x3.npy --out y=dyn_ref3.npy
check "... computing what torch computes" close dyn_ref3.npy y3_torch.npy 512

expect 0 "the opset-14 export (LayerNorm decomposed) imports" import enc14.onnx -o enc14.dlg
expect 0 "... runs at batch 3" run enc14.dlg -D batch=3 --in x=x3.npy --out y=e14_y3.npy
check "... computing what torch computes" close e14_y3.npy y3_torch.npy 512

finish
