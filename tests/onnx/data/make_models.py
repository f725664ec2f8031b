# Regenerates the small hand-made ONNX models used by tests/onnx/test_import.c.
# Run with /usr/bin/python3 (needs the onnx package); the outputs are committed.
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

def save(graph, name, opset=17, domain=""):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, opset)])
    m.ir_version = 8
    onnx.save(m, name)

# Awkward names, initializers, Constant nodes feeding a shape operand and a real operand.
nodes = [
    helper.make_node("Add", ["1x", "a:b"], ["a_b"], name="add0"),
    helper.make_node("Mul", ["a_b", "w"], ["m"]),
    helper.make_node("Constant", [], ["cshape"], value_ints=[3, 2]),
    helper.make_node("Reshape", ["m", "cshape"], ["r"]),
    helper.make_node("Constant", [], ["two"], value_float=2.0),
    helper.make_node("Div", ["r", "two"], ["out/0"]),
    helper.make_node("Cast", ["out/0"], ["h"], to=TensorProto.FLOAT16),
    helper.make_node("Reshape", ["1x", "shp"], ["r2"]),
    helper.make_node("LeakyRelu", ["r2"], ["lr"], alpha=0.1),
]
g = helper.make_graph(
    nodes, "names test",
    [helper.make_tensor_value_info("1x", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("a:b", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("out/0", TensorProto.FLOAT, [3, 2]),
     helper.make_tensor_value_info("h", TensorProto.FLOAT16, [3, 2]),
     helper.make_tensor_value_info("lr", TensorProto.FLOAT, [3, 2])],
    initializer=[numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w"),
                 numpy_helper.from_array(np.array([3, 2], dtype=np.int64), "shp")])
save(g, "names.onnx")

# A Reshape whose shape is computed: not importable.
nodes = [helper.make_node("Relu", ["s"], ["s2"]),
         helper.make_node("Reshape", ["x", "s2"], ["y"])]
g = helper.make_graph(nodes, "computed_shape",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
save(g, "computed_shape.onnx")

# Opset 18 (accepted: up to 21), opset 22 and a foreign domain (rejected).
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu18",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
save(g, "opset18.onnx", opset=18)
save(g, "opset22.onnx", opset=22)
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], domain="com.example")], "dom",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                        helper.make_opsetid("com.example", 1)])
m.ir_version = 8
onnx.save(m, "domain.onnx")

# Aliased initializers, as torch.onnx.export writes a fresh BatchNorm in eval mode: equal
# initializers are merged and running_var / running_mean become Identity of weight / bias.
C = 3
x_vi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, C])
y_vi = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, C])
ones = numpy_helper.from_array(np.ones(C, np.float32), "bn.weight")
zeros = numpy_helper.from_array(np.zeros(C, np.float32), "bn.bias")
nodes = [
    helper.make_node("Identity", ["bn.weight"], ["bn.running_var"], name="Identity_0"),
    helper.make_node("Identity", ["bn.bias"], ["bn.running_mean"], name="Identity_1"),
    helper.make_node("BatchNormalization",
                     ["x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"], ["y"],
                     name="bn", epsilon=1e-5, momentum=0.9),
]
save(helper.make_graph(nodes, "bn_alias", [x_vi], [y_vi], [ones, zeros]), "bn_alias.onnx")

# One initializer named directly as weight and running_var (and bias as running_mean); and a
# second BatchNorm whose statistics share the first one's.
rm = numpy_helper.from_array(np.zeros(C, np.float32), "rm")
rv = numpy_helper.from_array(np.ones(C, np.float32), "rv")
nodes = [
    helper.make_node("BatchNormalization", ["x", "bn.weight", "bn.bias", "bn.bias", "bn.weight"],
                     ["h"], name="bn1"),
    helper.make_node("BatchNormalization", ["h", "bn.weight", "bn.bias", "rm", "rv"], ["h2"]),
    helper.make_node("BatchNormalization", ["h2", "bn.weight", "bn.bias", "rm", "rv"], ["y"]),
]
save(helper.make_graph(nodes, "bn_shared", [x_vi], [y_vi], [ones, zeros, rm, rv]),
     "bn_shared.onnx")

# Tied weights: one initializer read by two MatMuls stays one param.
w = numpy_helper.from_array(np.eye(C, dtype=np.float32), "w")
nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("MatMul", ["h", "w"], ["y"])]
save(helper.make_graph(nodes, "tied", [x_vi], [y_vi], [w]), "tied_weights.onnx")

# Size bombs: a [100000, 100000] initializer without data, and one with a negative dim.
big = TensorProto(name="big", data_type=TensorProto.FLOAT, dims=[100000, 100000])
nodes = [helper.make_node("Add", ["x", "big"], ["y"])]
save(helper.make_graph(nodes, "bomb", [x_vi], [y_vi], [big]), "size_bomb.onnx")
neg = TensorProto(name="big", data_type=TensorProto.FLOAT, dims=[-1, 3])
save(helper.make_graph(nodes, "neg", [x_vi], [y_vi], [neg]), "neg_dim.onnx")

# 841 values whose names all sanitize to "y__" (a chain of Relu), then an output list.
punct = "!#$%&()*+,-/:;<=>?@[]^`{|}~'\""
names = ["y" + a + b for a in punct[:30] for b in punct[:30]]
nodes, prev = [], "x"
for n in names:
    nodes.append(helper.make_node("Relu", [prev], [n]))
    prev = n
save(helper.make_graph(nodes, "clash", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                       [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [2])]),
     "clash.onnx")
