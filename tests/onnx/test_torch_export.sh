#!/usr/bin/env bash
# tests/onnx/test_torch_export.sh — what PyTorch 1.13's torch.onnx.export writes imports and
# computes what torch computes: nn.TransformerEncoderLayer and nn.LSTM with static shapes and
# with a dynamic batch axis (Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains folded at
# import, the batch a named dim), run by `dlcc run` on the cpu backend and the reference
# evaluator at batch sizes other than the export's; PReLU, InstanceNorm2d, GroupNorm, Conv1d
# with 1-D pools, Upsample (nearest, bilinear, bicubic with and without align_corners, by scale
# and by size), Conv3d (strides, pads, dilations, groups, a dynamic batch, auto_pad SAME_*) and
# ConvTranspose1d / ConvTranspose3d, decomposed at import; and gradients through them: three SGD
# steps of an imported GroupNorm/PReLU/Upsample CNN, a 3-D CNN, 1-D and 3-D transposed
# convolutions, a bicubic Upsample and an LSTM against torch. Tolerance from float32 rounding:
# |got - torch| <= K * 2^-23 * (1 + |torch|), K the length of the longest sum on the path (a
# 128-wide matmul, LayerNorm over 64) times 4. Also, without torch (onnx only): shape
# computations that depend on a named dim in a way the graph format cannot say are refused,
# naming the dim; 1-D and 3-D ConvTranspose models (auto_pad, output_shape) against numpy's
# scatter form of ONNX's definition; refusals naming the attribute. Exit 77 without onnx.
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

# both M X WANT K WHAT: M.dlg runs on X.npy on the cpu backend and on the reference evaluator,
# each computing WANT.npy within K (see close).
both() {
  expect 0 "... runs (cpu)" run $1.dlg --in x=$2.npy --out y=$1_y.npy
  check "... computing $5" close $1_y.npy $3.npy $4
  expect 0 "... runs (reference evaluator)" run $1.dlg --backend ref --in x=$2.npy \
    --out y=$1_yr.npy
  check "... computing $5" close $1_yr.npy $3.npy $4
}

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

# 1-D and 3-D ConvTranspose (onnx.helper models) against numpy's scatter form of ONNX's
# definition: strides, dilations, pads, output_padding, groups, a bias, auto_pad SAME_UPPER /
# SAME_LOWER / VALID and output_shape (in depth one past the full output: negative padding, the
# extra depth gets only the bias).
"$py" - <<'PYEOF'
import itertools, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
def convt(x, w, b, strides, dils, pads, opad, oshape, auto_pad, group):
    nsp, (N, C), Mg = x.ndim - 2, x.shape[:2], w.shape[1]
    Cg, ks, ins = C // group, w.shape[2:], x.shape[2:]
    full = [s * (i - 1) + o + (k - 1) * d + 1
            for s, i, o, k, d in zip(strides, ins, opad, ks, dils)]
    if oshape or auto_pad.startswith("SAME"):
        out = oshape or [i * s for i, s in zip(ins, strides)]
        tot = [f - o for f, o in zip(full, out)]
        pb = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in tot]
    elif auto_pad == "VALID":
        out, pb = full, [0] * nsp
    else:
        out, pb = [f - pads[i] - pads[i + nsp] for i, f in enumerate(full)], pads[:nsp]
    y = np.zeros((N, Mg * group) + tuple(out))
    if b is not None:
        y += b.reshape((-1,) + (1,) * nsp)
    for k in itertools.product(*[range(n) for n in ks]):
        iv = [[j for j in range(ins[i]) if 0 <= j * strides[i] + k[i] * dils[i] - pb[i] < out[i]]
              for i in range(nsp)]
        ov = [[j * strides[i] + k[i] * dils[i] - pb[i] for j in iv[i]] for i in range(nsp)]
        if any(not v for v in iv):
            continue
        for g in range(group):
            xs = x[np.ix_(range(N), range(g * Cg, (g + 1) * Cg), *iv)].astype(np.float64)
            c = np.einsum("nc...,cm->nm...", xs, w[(slice(g * Cg, (g + 1) * Cg), slice(None)) + k])
            y[np.ix_(range(N), range(g * Mg, (g + 1) * Mg), *ov)] += c
    return y
rng = np.random.default_rng(0)
cases = {
    "ct3_pads": ((2, 4, 3, 4, 3), (4, 3, 3, 2, 3), True,
                 dict(strides=[2, 1, 2], dilations=[1, 2, 1], pads=[1, 0, 1, 0, 1, 2],
                      output_padding=[1, 0, 1], group=2)),
    # in depth a kernel shorter than the stride: total padding -1
    "ct3_same_upper": ((1, 2, 3, 3, 4), (2, 3, 2, 3, 2), True,
                       dict(auto_pad="SAME_UPPER", strides=[3, 2, 1])),
    "ct3_same_lower": ((1, 2, 3, 3, 4), (2, 3, 2, 3, 2), False,
                       dict(auto_pad="SAME_LOWER", strides=[3, 2, 1])),
    "ct3_valid": ((1, 2, 2, 3, 2), (2, 2, 2, 2, 3), True,
                  dict(auto_pad="VALID", strides=[3, 1, 2])),
    "ct3_oshape": ((1, 2, 3, 3, 3), (2, 2, 3, 3, 2), True,
                   dict(strides=[2, 2, 3], output_shape=[8, 6, 8])),
    "ct1_pads": ((2, 4, 5), (4, 3, 3), True,
                 dict(strides=[3], dilations=[2], pads=[2, 1], output_padding=[1], group=2)),
    "ct1_same": ((1, 2, 5), (2, 3, 4), True, dict(auto_pad="SAME_UPPER", strides=[2])),
}
for name, (xs, ws, bias, at) in cases.items():
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.uniform(-1, 1, ws).astype(np.float32)
    group = at.get("group", 1)
    b = rng.uniform(-1, 1, ws[1] * group).astype(np.float32) if bias else None
    nsp = len(xs) - 2
    y = convt(x, w, b, at.get("strides", [1] * nsp), at.get("dilations", [1] * nsp),
              at.get("pads", [0] * 2 * nsp), at.get("output_padding", [0] * nsp),
              at.get("output_shape"), at.get("auto_pad", "NOTSET"), group)
    inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(b, "b")] if bias else [])
    node = helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if bias else []), ["y"], **at)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", T.FLOAT, xs)],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), name + ".onnx")
    np.save(name + "_x.npy", x)
    np.save(name + "_want.npy", y)
# Refusals name the node and the attribute.
x = helper.make_tensor_value_info("x", T.FLOAT, [1, 1, 2, 3, 3])
w = numpy_helper.from_array(np.ones((1, 1, 2, 2, 2), np.float32), "w")
node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2, 1, 1],
                        output_padding=[2, 0, 0])
g = helper.make_graph([node], "bad_opad", [x], [helper.make_tensor_value_info("y", T.FLOAT, None)],
                      [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "bad_opad.onnx")
x = helper.make_tensor_value_info("x", T.FLOAT, [1, 1, 4, 4])
sc = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")
for name, at in (("bad_mode", dict(mode="area")), ("bad_aa", dict(mode="cubic", antialias=1))):
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"], name="rs", **at)
    g = helper.make_graph([node], name, [x], [helper.make_tensor_value_info("y", T.FLOAT, None)],
                          [sc])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), name + ".onnx")
PYEOF
for m in ct3_pads ct3_same_upper ct3_same_lower ct3_valid ct3_oshape ct1_pads ct1_same; do
  expect 0 "ConvTranspose $m: imports" import $m.onnx -o $m.dlg
  both $m ${m}_x ${m}_want 64 "ONNX's definition (numpy)"
done
check "a 3-D ConvTranspose is one 2-D ConvTranspose and a MatMul" \
  test "$(grep -cE '= (ConvTranspose|MatMul) ' ct3_pads.dlg)" -eq 2
check "a 1-D ConvTranspose is a 2-D one over [N, C, 1, L]" grep -qF 'strides = [1, 3]' \
  ct1_pads.dlg
expect_msg 1 "a depth output_padding not below the stride is refused, naming it" \
  "node 0 'up' (ConvTranspose): attribute 'output_padding' 2 (depth) must be >= 0 and smaller" \
  import bad_opad.onnx
expect_msg 1 "a Resize mode we lack is refused, naming it" \
  "attribute 'mode' = 'area' is not supported (supported: nearest, linear, cubic)" \
  import bad_mode.onnx
expect_msg 1 "an antialiased Resize is refused, naming the attribute" \
  "attribute 'antialias' = 1 is not supported (only 0)" import bad_aa.onnx

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

# nn.LSTM (one layer, batch_first): the ONNX LSTM op unrolled over its static length; the
# initial state is a ConstantOfShape (dynamic batch) or an Expand (static) of zeros.
"$py" - <<'PYEOF' 2>/dev/null
import numpy as np, torch
torch.manual_seed(0)
lstm = torch.nn.LSTM(16, 32, batch_first=True).eval()
x = torch.randn(2, 7, 16)
kw = dict(opset_version=17, input_names=["x"], output_names=["y", "h", "c"])
torch.onnx.export(lstm, x, "lstm.onnx", **kw)
torch.onnx.export(lstm, x, "lstm_dyn.onnx", dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                  **kw)
with torch.no_grad():
    for n in (2, 3):
        xb = torch.randn(n, 7, 16)
        y, (h, c) = lstm(xb)
        np.save("lx%d.npy" % n, xb.numpy())
        for k, v in (("y", y), ("h", h), ("c", c)):
            np.save("l%s%d_torch.npy" % (k, n), v.numpy())
PYEOF
expect 0 "nn.LSTM, static shapes, imports" import lstm.onnx -o lstm.dlg
expect 0 "... runs" run lstm.dlg --in x=lx2.npy --out y=ly2.npy --out h=lh2.npy --out c=lc2.npy
for k in y h c; do
  check "... $k is what torch computes" close l${k}2.npy l${k}2_torch.npy 1024
done
expect 0 "nn.LSTM with a dynamic batch imports" import lstm_dyn.onnx -o lstm_dyn.dlg
expect 0 "... runs at batch 3" run lstm_dyn.dlg -D batch=3 --in x=lx3.npy --out y=ly3.npy \
  --out c=lc3.npy
check "... y is what torch computes" close ly3.npy ly3_torch.npy 1024
check "... c is what torch computes" close lc3.npy lc3_torch.npy 1024

# PReLU, InstanceNorm2d, GroupNorm (exported as Reshape + InstanceNormalization), Conv1d with
# 1-D pools, Upsample nearest and bilinear, Hardswish.
"$py" - <<'PYEOF' 2>/dev/null
import numpy as np, torch
nn = torch.nn
torch.manual_seed(0)
class Up(nn.Module):
    def __init__(s, mode, align_corners=False, size=None):
        super().__init__()
        s.c = nn.Conv2d(2, 3, 3, padding=1)
        s.u = nn.Upsample(scale_factor=None if size else 2, size=size, mode=mode,
                          **({} if mode == "nearest" else {"align_corners": align_corners}))
    def forward(s, x):
        return s.u(s.c(x))
models = {
    "prelu": (nn.Sequential(nn.Conv2d(3, 4, 3), nn.PReLU(4), nn.Hardswish()), (2, 3, 8, 8)),
    "inorm": (nn.Sequential(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, affine=True)), (2, 3, 8, 8)),
    "gnorm": (nn.Sequential(nn.Conv2d(3, 4, 3), nn.GroupNorm(2, 4)), (2, 3, 8, 8)),
    "conv1d": (nn.Sequential(nn.Conv1d(3, 4, 3, padding=1, stride=2), nn.ReLU(),
                             nn.MaxPool1d(2), nn.AvgPool1d(2)), (2, 3, 16)),
    "up_nearest": (Up("nearest"), (2, 2, 5, 4)),
    "up_bilinear": (Up("bilinear"), (2, 2, 5, 4)),
    "up_bicubic": (Up("bicubic"), (2, 2, 5, 4)),
    "up_bicubic_ac": (Up("bicubic", align_corners=True), (2, 2, 5, 4)),
    "rs_bicubic": (Up("bicubic", size=(3, 7)), (2, 2, 5, 4)),  # H down, W up, by sizes
    # transposed: strides, pads, output_padding, dilations, groups, a bias; then a stride
    # longer than the kernel
    "convt1d": (nn.Sequential(nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1,
                                                 groups=2), nn.ReLU(),
                              nn.ConvTranspose1d(6, 2, 2, dilation=2, bias=False)), (2, 4, 7)),
    "convt3d": (nn.Sequential(nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=(2, 1, 2),
                                                 padding=(1, 0, 1), output_padding=(1, 0, 1),
                                                 dilation=(1, 2, 1), groups=2), nn.ReLU(),
                              nn.ConvTranspose3d(6, 2, (2, 1, 1), stride=(3, 1, 1), bias=False)),
                (2, 4, 3, 4, 3)),
    # 3-D: depth stride, padding, dilation, groups and a bias, then a 1x1x1 without bias
    "conv3d": (nn.Sequential(nn.Conv3d(4, 6, (3, 2, 3), stride=(2, 1, 1), padding=(1, 0, 1),
                                       dilation=(1, 2, 1), groups=2), nn.ReLU(),
                             nn.Conv3d(6, 2, 1, bias=False)), (2, 4, 7, 6, 5)),
}
for name, (m, shape) in models.items():
    m.eval()
    for p in m.parameters():  # not the init's ones and zeros: every term must matter
        p.data.uniform_(-1, 1)
    x = torch.randn(*shape)
    torch.onnx.export(m, x, name + ".onnx", opset_version=17, input_names=["x"],
                      output_names=["y"])
    np.save(name + "_x.npy", x.numpy())
    with torch.no_grad():
        np.save(name + "_torch.npy", m(x).numpy())
PYEOF
for m in prelu inorm gnorm conv1d up_nearest up_bilinear up_bicubic up_bicubic_ac rs_bicubic \
  convt1d convt3d conv3d; do
  expect 0 "$m: the torch export imports" import $m.onnx -o $m.dlg
  both $m ${m}_x ${m}_torch 256 "what torch computes"
done
check "PRelu is decomposed into Where" grep -q 'Where' prelu.dlg
check "a 3-D Conv is one 2-D Conv over the depth windows" \
  test "$(grep -cE '= Conv <kernel_shape = \[(2, 3|1, 1)\]' conv3d.dlg)" -eq 2
# A 3-D Conv with a dynamic batch (run at batch 3), and ONNX's auto_pad SAME_UPPER / SAME_LOWER
# (onnx.helper models) against torch's conv3d of the input padded by ONNX's rule.
"$py" - <<'PYEOF' 2>/dev/null
import numpy as np, onnx, torch
from onnx import helper, numpy_helper, TensorProto as T
torch.manual_seed(1)
m = torch.nn.Conv3d(3, 4, 2, stride=(1, 2, 1)).eval()
torch.onnx.export(m, torch.randn(2, 3, 5, 6, 4), "c3dyn.onnx", opset_version=17,
                  input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
x = torch.randn(3, 3, 5, 6, 4)
np.save("c3dyn_x.npy", x.numpy())
with torch.no_grad():
    np.save("c3dyn_torch.npy", m(x).numpy())
w = np.random.default_rng(0).uniform(-1, 1, (4, 3, 3, 2, 3)).astype(np.float32)
x = np.random.default_rng(1).standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
np.save("same_x.npy", x)
for mode in ("SAME_UPPER", "SAME_LOWER"):
    node = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad=mode, strides=[2, 1, 3])
    g = helper.make_graph([node], "c3", [helper.make_tensor_value_info("x", T.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)],
                          [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), mode + ".onnx")
    pads = []
    for size, k, s in zip(x.shape[2:], w.shape[2:], (2, 1, 3)):
        total = max((-(-size // s) - 1) * s + k - size, 0)
        lo = total // 2 if mode == "SAME_UPPER" else total - total // 2
        pads = [lo, total - lo] + pads  # F.pad lists the last axis first
    xp = torch.nn.functional.pad(torch.from_numpy(x), pads)
    y = torch.nn.functional.conv3d(xp, torch.from_numpy(w), stride=(2, 1, 3))
    np.save(mode + "_torch.npy", y.numpy())
PYEOF
expect 0 "a 3-D Conv with a dynamic batch imports" import c3dyn.onnx -o c3dyn.dlg
expect 0 "... runs at batch 3" run c3dyn.dlg -D batch=3 --in x=c3dyn_x.npy --out y=c3dyn_y.npy
check "... computing what torch computes" close c3dyn_y.npy c3dyn_torch.npy 64
for mode in SAME_UPPER SAME_LOWER; do
  expect 0 "3-D Conv, auto_pad $mode: imports" import $mode.onnx -o $mode.dlg
  expect 0 "... runs" run $mode.dlg --in x=same_x.npy --out y=${mode}_y.npy
  check "... computing torch's conv3d of the input padded by ONNX's rule" close ${mode}_y.npy \
    ${mode}_torch.npy 128
done
check "a 1-D Conv is a 2-D one over [N, C, 1, L]" grep -qF 'kernel_shape = [1, 3]' conv1d.dlg

# Gradients through the decompositions: GroupNorm (InstanceNormalization), PReLU, bilinear
# Upsample, 3-D convolutions, 1-D and 3-D transposed convolutions, a bicubic Upsample and an
# LSTM, and a transformer encoder layer, imported with --train-loss mse, three SGD steps of dlcc
# give the params three torch steps give.
"$py" - <<'PYEOF' 2>/dev/null
import json, numpy as np, onnx, onnx.numpy_helper, torch
nn = torch.nn
torch.manual_seed(0)
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.c = nn.Conv2d(2, 4, 3, padding=1)
        s.g = nn.GroupNorm(2, 4)
        s.p = nn.PReLU(4)
        s.u = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        s.o = nn.Conv2d(4, 1, 1)
    def forward(s, x):
        return s.o(s.u(s.p(s.g(s.c(x)))))
class L(nn.Module):
    def __init__(s):
        super().__init__()
        s.l = nn.LSTM(3, 5, batch_first=True)
    def forward(s, x):
        return s.l(x)[0]
class E(nn.Module):  # a transformer encoder layer with a linear head over the mean token
    def __init__(s):
        super().__init__()
        s.e = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0,
                                         batch_first=True)
        s.o = nn.Linear(16, 4)
    def forward(s, x):
        return s.o(s.e(x).mean(dim=1))
class C3(nn.Module):  # two 3-D convolutions, strided and padded in depth
    def __init__(s):
        super().__init__()
        s.c = nn.Conv3d(2, 3, 3, padding=1, stride=(2, 1, 1))
        s.o = nn.Conv3d(3, 1, (2, 1, 1))
    def forward(s, x):
        return s.o(torch.tanh(s.c(x)))
class CT(nn.Module):  # a transposed convolution (1-D or 3-D), then a 1x1 convolution
    def __init__(s, d):
        super().__init__()
        s.c = (nn.ConvTranspose1d if d == 1 else nn.ConvTranspose3d)(2, 3, 3, stride=2,
                                                                     padding=1, output_padding=1)
        s.o = (nn.Conv1d if d == 1 else nn.Conv3d)(3, 1, 1)
    def forward(s, x):
        return s.o(torch.tanh(s.c(x)))
class BC(nn.Module):  # a bicubic Upsample between two convolutions
    def __init__(s):
        super().__init__()
        s.c = nn.Conv2d(2, 3, 3, padding=1)
        s.u = nn.Upsample(scale_factor=2, mode="bicubic", align_corners=False)
        s.o = nn.Conv2d(3, 1, 1)
    def forward(s, x):
        return s.o(s.u(torch.tanh(s.c(x))))
for name, m, shape, oshape in (("tgn", M(), (4, 2, 4, 4), (4, 1, 8, 8)),
                               ("tc3d", C3(), (2, 2, 5, 4, 4), (2, 1, 2, 4, 4)),
                               ("tct1", CT(1), (4, 2, 5), (4, 1, 10)),
                               ("tct3", CT(3), (2, 2, 3, 3, 3), (2, 1, 6, 6, 6)),
                               ("tbic", BC(), (4, 2, 4, 4), (4, 1, 8, 8)),
                               ("tlstm", L(), (4, 6, 3), (4, 6, 5)),
                               ("tenc", E(), (4, 5, 16), (4, 4))):
    for p in m.parameters():
        p.data.uniform_(-0.5, 0.5)
    x, y = torch.randn(3, *shape), torch.randn(3, *oshape)
    torch.onnx.export(m.eval(), x[0], name + ".onnx", opset_version=17, input_names=["x"],
                      output_names=["out"])
    np.save(name + "_xs.npy", x.numpy())
    np.save(name + "_ys.npy", y.numpy())
    # The exporter renames params it reshapes (GroupNorm's affine weight becomes [C, 1, 1]):
    # find each initializer's param by value, before training changes them.
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(name + ".onnx").graph.initializer}
    names = {o: [k, False] for k, v in m.state_dict().items() for o, a in inits.items()
             if a.size == v.numel() and a.size > 1 and np.array_equal(a.ravel(), v.numpy().ravel())}
    # ... and Linear weights it writes transposed for MatMul
    names.update({o: [k, True] for k, v in m.state_dict().items() for o, a in inits.items()
                  if o not in names and a.ndim == 2 and a.shape[::-1] == tuple(v.shape)
                  and np.array_equal(a.T, v.numpy())})
    json.dump(names, open(name + "_names.json", "w"))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for k in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(m(x[k]), y[k]).backward()
        opt.step()
    np.savez(name + "_torch.npz", **{k: v.detach().numpy() for k, v in m.state_dict().items()})
PYEOF
# cmp_params.py NAME: NAME.safetensors (dlcc) against NAME_torch.npz (torch's state_dict); the
# LSTM's weights are found under the exporter's names, its gates reordered (torch i f g o, ONNX
# i o f c) and its two biases concatenated; renamed ones through NAME_names.json (found by value, maybe transposed).
cat >cmp_params.py <<'PYEOF'
import json, re, struct, sys, numpy as np, onnx
name = sys.argv[1]
b = open(name + ".safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
def got(k):
    k = re.sub(r"[^A-Za-z0-9_.]", "_", k)
    e = h[k]
    a = np.frombuffer(b[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]], np.float32)
    return a.reshape(e["shape"])
t = dict(np.load(name + "_torch.npz"))
renamed = json.load(open(name + "_names.json"))
want = {o: t[k].T if tr else t[k] for o, (k, tr) in renamed.items()}
want.update({k: v for k, v in t.items() if k not in [k for k, _ in renamed.values()]
             and not k.startswith("l.") and v.size > 1})
for nd in onnx.load(name + ".onnx").graph.node:
    if nd.op_type == "LSTM":
        hs = t["l.weight_hh_l0"].shape[1]
        ro = lambda w: np.concatenate([w[0:hs], w[3 * hs:], w[hs:2 * hs], w[2 * hs:3 * hs]])[None]
        want[nd.input[1]] = ro(t["l.weight_ih_l0"])
        want[nd.input[2]] = ro(t["l.weight_hh_l0"])
        want[nd.input[3]] = np.concatenate([ro(t["l.bias_ih_l0"]), ro(t["l.bias_hh_l0"])], 1)
bad = [k for k, v in want.items()
       if not np.allclose(got(k), v.reshape(got(k).shape), rtol=1e-4, atol=1e-5)]
print("compared", len(want), "params; differ:", bad)
sys.exit(bool(bad) or not want)
PYEOF
for m in tgn tc3d tct1 tct3 tbic tlstm tenc; do
  expect 0 "$m: import --train-loss mse" import $m.onnx -o $m.dlg --train-loss mse \
    --optimizer sgd --lr 0.1
  expect 0 "... three SGD steps" run $m.dlg --entry train_step --steps 3 --in x=${m}_xs.npy \
    --in target=${m}_ys.npy --save-params $m.safetensors
  check "... give the params torch's three steps give" "$py" cmp_params.py $m
done

finish
