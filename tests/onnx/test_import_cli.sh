#!/usr/bin/env bash
# tests/onnx/test_import_cli.sh — `dlcc import` on hostile and awkward models: 5000 nested If
# subgraphs (used to overflow the stack inside protobuf-c: exit 139), a [100000, 100000]
# initializer without data (used to allocate 40 GB first), a model whose shapes `dlcc check`
# rejects (used to be written anyway), and BatchNorm statistics that an exporter aliased to the
# weights (a real torch.onnx.export when torch is installed, else skipped; the same structure is
# covered by test_onnx_import). Each failing import must exit 1 and leave OUT untouched.
# usage: test_import_cli.sh DLCC SOURCE_DIR ONNX_NODE_DIR
set -u
if [ $# -ne 3 ]; then
  echo "usage: test_import_cli.sh DLCC SOURCE_DIR ONNX_NODE_DIR" >&2
  exit 2
fi
prog=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
node_dir=$3
source "$src/tests/harness/cli_lib.sh"

untouched() { test "$(cat keep.dlg)" = "keep"; }
echo keep >keep.dlg

# 5000 nested If nodes, written as raw protobuf (the onnx helpers copy each subgraph: quadratic),
# and bad_add.onnx for a later case.
"$py" - <<'PYEOF'
def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)
def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload
g = b""
for _ in range(5000):
    attr = field(1, b"then_branch") + varint(20 << 3) + varint(5) + field(6, g)
    g = field(1, field(4, b"If") + field(5, attr))
model = varint(1 << 3) + varint(8) + field(8, varint(2 << 3) + varint(17)) + field(7, g)
open("deep_if.onnx", "wb").write(model)
# Add of [2, 3] and [4, 5]: imports, but its shapes do not check.
def value_info(name, dims):  # float tensor: TypeProto.tensor_type {elem_type 1, shape}
    shape = b"".join(field(1, varint(1 << 3) + varint(d)) for d in dims)
    tensor = varint(1 << 3) + varint(1) + field(2, shape)
    return field(1, name.encode()) + field(2, field(1, tensor))
node = field(1, b"a") + field(1, b"b") + field(2, b"y") + field(4, b"Add")
graph = (field(1, node) + field(2, b"bad_add") + field(11, value_info("a", [2, 3])) +
         field(11, value_info("b", [4, 5])) + field(12, value_info("y", [2, 3])))
model = varint(1 << 3) + varint(8) + field(8, varint(2 << 3) + varint(17)) + field(7, graph)
open("bad_add.onnx", "wb").write(model)
PYEOF
expect_msg 1 "5000 nested If subgraphs are refused, not a crash" \
  "messages nested more than 100 deep" import deep_if.onnx -o keep.dlg
check "refused deep model leaves OUT untouched" untouched

# Every unsupported op at once, with its count: Acos twice, Sin once, a custom domain's op.
if "$py" -c 'import onnx' 2>/dev/null; then
  "$py" - <<'PYEOF'
import onnx
from onnx import helper, TensorProto
n = [helper.make_node("Acos", ["x"], ["a"]), helper.make_node("Acos", ["a"], ["b"]),
     helper.make_node("Relu", ["b"], ["c"]), helper.make_node("Sin", ["c"], ["s"]),
     helper.make_node("FusedGelu", ["c"], ["g"], domain="com.microsoft")]
g = helper.make_graph(n, "many", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 3]),
                       helper.make_tensor_value_info("g", TensorProto.FLOAT, [2, 3])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                        helper.make_opsetid("com.microsoft", 1)])
onnx.save(m, "many_unsupported.onnx")
PYEOF
  "$py" - <<'PYEOF'
import onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=1)], "sm11",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]), "softmax11.onnx")
PYEOF
  expect_msg 1 "opset-11 Softmax over axis 1 (2-D coercion) is refused, saying why" \
    "Softmax of opset 11 flattens its input to 2-D at \`axis\`; only the last axis" \
    import softmax11.onnx -o keep.dlg
  expect_msg 1 "every unsupported op is named at once, with its count" \
    "3 kinds of op are not supported: node 0 (Acos): op 'Acos' is not supported (2 nodes); node 3 (Sin): op 'Sin' is not supported; node 4 (FusedGelu): domain 'com.microsoft' is not supported" \
    import many_unsupported.onnx -o keep.dlg
  check "... and nothing is written" untouched
else
  echo "note: onnx is not available to $py, the unsupported-ops case skipped"
fi

expect_msg 1 "an initializer of [100000, 100000] without data is refused before allocating" \
  "initializer 'big' holds 0 values, its shape [100000, 100000] needs 10000000000" \
  import "$src/tests/onnx/data/size_bomb.onnx" -o keep.dlg
check "refused size bomb leaves OUT untouched" untouched
expect_msg 1 "a negative initializer dim is refused" "initializer 'big' has negative dimension -1" \
  import "$src/tests/onnx/data/neg_dim.onnx" -o keep.dlg

# Imports, but Add of [2, 3] and [4, 5] fails shape inference: nothing is written (bad_add.onnx,
# raw protobuf above, so the case needs no onnx package).
expect_msg 1 "a model that dlcc check would reject is not written" \
  "the imported model does not check" import bad_add.onnx -o keep.dlg
check "rejected import leaves OUT untouched" untouched
check "the reason is the shape error" grep -qF "shapes are not broadcastable" "$err"
expect 1 "nor printed to stdout" import bad_add.onnx
check "stdout stays empty" test ! -s "$out"

# Aliased BatchNorm statistics (the helper-built model of tests/onnx/data).
expect 0 "aliased statistics import" import "$src/tests/onnx/data/bn_alias.onnx" -o bn.dlg
check "without -v no notes are printed" test ! -s "$err"
expect 0 "the imported model checks" check bn.dlg
expect_msg 0 "-v notes each copied alias" \
  "makes 'bn.running_var' an alias of initializer 'bn.weight'" import -v "$src/tests/onnx/data/bn_alias.onnx" -o bn.dlg
check "-v prints one note per alias" test "$(grep -c '^note: ' "$err")" -eq 2
check "running_var is a param of its own" grep -qE '^param +bn\.running_var +: float\[3\] += \[1\.0, 1\.0, 1\.0\]' bn.dlg
check "no Identity is left" bash -c '! grep -q Identity bn.dlg'

# The real exporter: torch.onnx.export of a fresh BatchNorm in eval mode.
if "$py" -c 'import torch, onnx' 2>/dev/null; then
  "$py" - <<'PYEOF' 2>/dev/null
import torch, onnx
class M(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.l = torch.nn.Linear(3, 4)
        s.bn = torch.nn.BatchNorm1d(4)
    def forward(s, x):
        return s.bn(s.l(x))
m = M().eval()
torch.onnx.export(m, torch.randn(2, 3), "torch_bn.onnx", opset_version=17)
g = onnx.load("torch_bn.onnx").graph
ids = {n.output[0]: n.input[0] for n in g.node if n.op_type == "Identity"}
open("torch_alias.txt", "w").write(repr(sorted(ids.items())))
PYEOF
  check "torch.onnx.export really aliases running_var to the weight" \
    grep -qF "('bn.running_var', 'bn.weight')" torch_alias.txt
  expect 0 "the torch export imports" import -v torch_bn.onnx -o torch_bn.dlg
  check "each aliased statistic is noted" test "$(grep -c '^note: ' "$err")" -eq 2
  check "the BatchNorm reads its own statistics" \
    grep -qE 'BatchNormalization .*\(.*, bn\.weight, bn\.bias, bn\.running_mean, bn\.running_var\)' torch_bn.dlg
  check "bn.running_var is a param" grep -qE '^param +bn\.running_var ' torch_bn.dlg
  expect 0 "the imported torch model checks" check torch_bn.dlg

  # dynamic_axes: the symbolic batch dim becomes a named dim (default 1), bound with -D.
  "$py" - <<'PYEOF' 2>/dev/null
import torch
m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
torch.onnx.export(m, torch.randn(2, 3), "dyn.onnx", opset_version=17, input_names=["x"],
                  output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
PYEOF
  expect_msg 0 "a torch export with dynamic_axes imports" \
    "dimension 0 is symbolic ('batch'): it becomes \`dim batch = 1\`; bind it with -D batch=SIZE" \
    import -v dyn.onnx -o dyn.dlg
  check "... the batch dim is a named dim" grep -qE '^dim +batch += 1$' dyn.dlg
  check "... which the input uses" grep -qE '^input +x +: float\[batch, 3\]' dyn.dlg
  expect 0 "... and it compiles at another batch size" compile -D batch=64 dyn.dlg -o dyn64.so
  "$py" -c "import numpy as np; np.save('x5.npy', np.ones((5, 3), np.float32))"
  expect 0 "... and runs there (reference evaluator)" run dyn.dlg -D batch=5 --backend ref \
    --in x=x5.npy --out y=y5.npy
  check "... giving [5, 2]" "$py" -c "import numpy as np, sys; sys.exit(np.load('y5.npy').shape != (5, 2))"
  # Large weights beside the .dlg: an MLP of 64-128-10 (two weights of > 1024 values).
  "$py" - <<'PYEOF' 2>/dev/null
import numpy as np, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
x = torch.randn(4, 64)
torch.onnx.export(m, x, "wmlp.onnx", opset_version=17, input_names=["x"], output_names=["y"])
np.save("wx.npy", x.numpy())
np.save("wy_torch.npy", m(x).detach().numpy())
PYEOF
  mkdir -p wout
  expect 0 "large weights go to a safetensors file beside the .dlg" import wmlp.onnx -o wout/m.dlg
  check "... wout/m.safetensors" test -s wout/m.safetensors
  check "... read by file() initialisers" grep -qE '^param +v0\.weight +: float\[128, 64\] = file\("m\.safetensors", "v0\.weight"\)' wout/m.dlg
  check "... small ones stay inline" grep -qE '^param +v0\.bias +: float\[128\] += \[' wout/m.dlg
  check "... so the .dlg is small" test "$(wc -c <wout/m.dlg)" -lt 8000
  expect 0 "... it runs from another directory, compiled" run "$work/wout/m.dlg" --in x=wx.npy \
    --out y=wy.npy
  check "... computing what torch computes" "$py" -c "
import numpy as np, sys
sys.exit(not np.allclose(np.load('wy.npy'), np.load('wy_torch.npy'), rtol=1e-5, atol=1e-6))"
  expect 0 "--inline-weights keeps every value in the text" import wmlp.onnx --inline-weights \
    -o inl.dlg
  check "... and writes no weights file" test ! -e inl.safetensors
  check "... inline" bash -c '! grep -q "file(" inl.dlg'
  expect 1 "an import that cannot write OUT leaves no weights file behind" \
    import wmlp.onnx -o nodir/m.dlg
  check "... none" test ! -e nodir

  # An imported CNN trains: --train-loss appends labels, the loss and a train block; three SGD
  # steps of dlcc give the params three torch steps give (float32 sums of a few hundred terms).
  "$py" - <<'PYEOF' 2>/dev/null
import numpy as np, torch
torch.manual_seed(0)
class CNN(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.c = torch.nn.Conv2d(1, 4, 3, padding=1)
        s.f = torch.nn.Linear(4 * 4 * 4, 5)
    def forward(s, x):
        return s.f(torch.flatten(torch.nn.functional.max_pool2d(torch.relu(s.c(x)), 2), 1))
m = CNN()
x, y = torch.randn(3, 8, 1, 8, 8), torch.randint(0, 5, (3, 8))
torch.onnx.export(m.eval(), x[0], "tcnn.onnx", opset_version=17, input_names=["x"],
                  output_names=["logits"])
np.save("txs.npy", x.numpy())
np.save("tys.npy", y.numpy())
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for k in range(3):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(x[k]), y[k]).backward()
    opt.step()
np.savez("tcnn_torch.npz", **{k: v.detach().numpy() for k, v in m.state_dict().items()})
PYEOF
  expect 0 "import --train-loss cross_entropy appends a train block" import tcnn.onnx -o tcnn.dlg \
    --train-loss cross_entropy --optimizer sgd --lr 0.1
  check "... labels int64[8] (the logits' shape without the class dim)" \
    grep -qE '^input +labels +: int64\[8\]$' tcnn.dlg
  check "... the loss" grep -qF 'loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (logits, labels)' tcnn.dlg
  expect 0 "... and it trains: three steps" run tcnn.dlg --entry train_step --steps 3 \
    --in x=txs.npy --in labels=tys.npy --save-params tcnn.safetensors
  check "... to the params torch's three SGD steps give" "$py" -c "
import json, struct, sys, numpy as np
b = open('tcnn.safetensors', 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
t = np.load('tcnn_torch.npz')
ok = True
for k in t.files:
    e = h[k]
    a = np.frombuffer(b[8 + n + e['data_offsets'][0]:8 + n + e['data_offsets'][1]], np.float32)
    ok = ok and np.allclose(a.reshape(e['shape']), t[k], rtol=1e-5, atol=1e-6)
sys.exit(not ok)"
  expect_msg 2 "--train-loss checks its loss" "--train-loss: unknown loss 'hinge'" \
    import tcnn.onnx --train-loss hinge
  expect_msg 2 "--optimizer without --train-loss is refused" "go with --train-loss" \
    import tcnn.onnx --optimizer sgd

  # Opset 11 (PyTorch's export of older code): Unsqueeze / ReduceSum axes and Split's split as
  # attributes, Softmax over the last axis; the imported model computes what torch computes.
  "$py" - <<'PYEOF' 2>/dev/null
import numpy as np, torch
class M(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.l = torch.nn.Linear(6, 6)
    def forward(s, x):
        a, b = torch.split(s.l(x), [2, 4], dim=1)
        t = a.unsqueeze(1).sum(dim=2) + b.sum(dim=1, keepdim=True)
        return torch.softmax(torch.cat([t, b], 1), dim=-1)
torch.manual_seed(0)
m = M().eval()
x = torch.randn(3, 6)
torch.onnx.export(m, x, "op11.onnx", opset_version=11, input_names=["x"], output_names=["y"])
np.save("x11.npy", x.numpy())
np.save("y11_torch.npy", m(x).detach().numpy())
PYEOF
  expect 0 "an opset-11 torch export imports" import op11.onnx -o op11.dlg
  expect 0 "... and runs (reference evaluator)" run op11.dlg --backend ref --in x=x11.npy \
    --out y=y11.npy
  check "... computing what torch computes (float32 rounding of 6-term sums)" "$py" -c "
import numpy as np, sys
a, b = np.load('y11.npy'), np.load('y11_torch.npy')
sys.exit(not (a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6)))"
else
  echo "note: torch is not available to $py, torch export case skipped"
fi

finish
