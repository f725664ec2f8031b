"""Cross-check for tests/safetensors/test_safetensors.c without the safetensors package.

  st_crosscheck.py check FILE   parse FILE with json + struct + numpy, compare with expected()
  st_crosscheck.py write FILE   write expected() the same way the format describes
Both sides generate the same tensors from the same formulas (see make_values in the C test).
"""
import json
import struct
import sys

import numpy as np

DT = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "I32": "<i4", "I64": "<i8", "BOOL": "|b1"}


def expected():
    # name -> (dtype, shape, values); values as numpy arrays in the stored representation
    n = 6
    i = np.arange(n)
    f = (i * 0.5 - 1.25).astype("<f4")
    bf16 = (f.view("<u4") >> 16).astype("<u2")  # exact: these floats have <= 8 mantissa bits
    return {
        "f32": ("F32", [2, 3], f.reshape(2, 3)),
        "f16": ("F16", [6], f.astype("<f2")),
        "bf16": ("BF16", [3, 2], bf16.reshape(3, 2)),
        "i32": ("I32", [6], (i * 7 - 20).astype("<i4")),
        "i64": ("I64", [1, 6], (i * 3_000_000_000 - 5).astype("<i8").reshape(1, 6)),
        "bool": ("BOOL", [6], (i % 2 == 1)),
        "scalar": ("F32", [], np.array(3.5, dtype="<f4")),
        "empty": ("I32", [0, 4], np.zeros((0, 4), dtype="<i4")),
    }


META = {"quote\"back\\slash": "line\nbreak\ttab\x01 caf\u00e9 \u2603", "step": "42"}


def check(path):
    b = open(path, "rb").read()
    (n,) = struct.unpack("<Q", b[:8])
    assert n % 8 == 0, n
    hdr = json.loads(b[8 : 8 + n].decode("utf-8"))
    data = b[8 + n :]
    assert hdr.pop("__metadata__") == META, "metadata"
    exp = expected()
    assert list(hdr) == list(exp), list(hdr)  # order kept as added
    end = 0
    for name, (dt, shape, vals) in exp.items():
        e = hdr[name]
        assert e["dtype"] == dt and e["shape"] == shape, (name, e)
        lo, hi = e["data_offsets"]
        assert lo == end, name
        end = hi
        arr = np.frombuffer(data[lo:hi], dtype=DT[dt]).reshape(shape)
        assert arr.dtype == vals.dtype or dt == "BOOL", (name, arr.dtype)
        assert np.array_equal(arr, vals), (name, arr, vals)
    assert end == len(data)


def write(path):
    exp = expected()
    # a different order and layout from the C writer: reversed, spaces, __metadata__ last
    hdr, blobs, off = {}, [], 0
    for name, (dt, shape, vals) in reversed(list(exp.items())):
        raw = np.ascontiguousarray(vals).astype(DT[dt]).tobytes()
        hdr[name] = {"data_offsets": [off, off + len(raw)], "shape": shape, "dtype": dt}
        off += len(raw)
        blobs.append(raw)
    hdr["__metadata__"] = META
    h = json.dumps(hdr, indent=1).encode("utf-8")  # ASCII with \u escapes
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


if __name__ == "__main__":
    {"check": check, "write": write}[sys.argv[1]](sys.argv[2])
