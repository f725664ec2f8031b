# Regenerates the .npy and safetensors seed corpora of tests/fuzz (corpus_npy/,
# corpus_safetensors/): small valid files of every element type, plus a few near-misses. Run
# with /usr/bin/python3 (numpy) from tests/fuzz; the outputs are committed. The ONNX seeds
# (corpus_onnx/) are copies of small models from Debian's libonnx-testdata, of the hand-made
# models of tests/onnx/data (aliases, size bombs), a torch.onnx.export of Linear+BatchNorm in
# eval mode (torch_bn_eval_alias.onnx), and deep_if_120.onnx, written below.
import io, json, os, struct
import numpy as np

os.makedirs("corpus_npy", exist_ok=True)
os.makedirs("corpus_safetensors", exist_ok=True)

def npy(name, arr, version=None):
    b = io.BytesIO()
    np.lib.format.write_array(b, arr, version=version)
    open(os.path.join("corpus_npy", name), "wb").write(b.getvalue())

npy("f4_2x3.npy", np.arange(6, dtype="<f4").reshape(2, 3))
npy("f2_4.npy", np.arange(4, dtype="<f2"))
npy("u2_3.npy", np.array([1, 2, 3], dtype="<u2"))
npy("i4_scalar.npy", np.array(7, dtype="<i4"))
npy("i8_2x0.npy", np.zeros((2, 0), dtype="<i8"))
npy("b1_5.npy", np.array([1, 0, 1, 1, 0], dtype="|b1"))
npy("f8_2.npy", np.array([1.5, -2.0], dtype="<f8"))
npy("u1_i1_i2.npy", np.arange(3, dtype="|u1"))
npy("i2_2x2x2.npy", np.arange(8, dtype="<i2").reshape(2, 2, 2))
npy("v2_f4.npy", np.arange(3, dtype="<f4"), version=(2, 0))
npy("v3_f4.npy", np.arange(3, dtype="<f4"), version=(3, 0))
npy("fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
npy("big_endian.npy", np.arange(3, dtype=">f4"))
with open("corpus_npy/truncated.npy", "wb") as f:
    b = io.BytesIO()
    np.lib.format.write_array(b, np.arange(6, dtype="<f4"))
    f.write(b.getvalue()[:-5])

def st(name, tensors, meta=None, tweak=None):
    hdr, data = {}, b""
    if meta:
        hdr["__metadata__"] = meta
    for k, (dt, shape, raw) in tensors.items():
        hdr[k] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    blob = struct.pack("<Q", len(h)) + h + data
    if tweak:
        blob = tweak(blob)
    open(os.path.join("corpus_safetensors", name), "wb").write(blob)

f32 = np.arange(6, dtype="<f4").tobytes()
st("f32.safetensors", {"w": ("F32", [2, 3], f32)}, {"format": "pt"})
st("all_dtypes.safetensors", {
    "a": ("F16", [2], np.ones(2, "<f2").tobytes()),
    "b": ("BF16", [1, 2], b"\x80\x3f\x00\x40"),
    "c": ("I32", [], np.array(3, "<i4").tobytes()),
    "d": ("I64", [2], np.arange(2, dtype="<i8").tobytes()),
    "e": ("BOOL", [3], b"\x01\x00\x01"),
    "f": ("F32", [0, 4], b""),
})
st("empty.safetensors", {})
st("meta_escapes.safetensors", {"x\\u00e9\"": ("F32", [1], f32[:4])}, {"k\n": "v\u2603"})
st("f64_unsupported.safetensors", {"d": ("F64", [1], b"\0" * 8)})
st("bad_bool.safetensors", {"e": ("BOOL", [2], b"\x01\x07")})
st("gap.safetensors", {"w": ("F32", [1], f32[:4])}, tweak=lambda b: b + b"\0\0\0\0")

# 120 nested If subgraphs, past the importer's nesting limit (written as raw protobuf).
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
for _ in range(120):
    attr = field(1, b"then_branch") + varint(20 << 3) + varint(5) + field(6, g)
    g = field(1, field(4, b"If") + field(5, attr))
model = varint(1 << 3) + varint(8) + field(8, varint(2 << 3) + varint(17)) + field(7, g)
open("corpus_onnx/deep_if_120.onnx", "wb").write(model)
