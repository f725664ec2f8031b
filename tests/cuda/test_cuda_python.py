"""The Python binding on a CUDA session, against the mock driver (tests/cuda/mock_cuda.c through
DLRT_LIBCUDA; no kernel runs there): Session.device is "cuda", inputs given by set_input or
infer(**inputs) are copied (a GPU cannot read host memory), outputs come back as copies,
output(copy=False) is refused with a message, params read back equal a CPU session's initial
values, and a checkpoint of the CUDA session loads into a CPU session.

Usage: test_cuda_python.py MODEL.dlg   (DLCC_EXE, DLRT_LIBRARY, DLRT_LIBCUDA in the environment)
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import numpy as np  # noqa: E402

import dlcc  # noqa: E402


def main():
    model = sys.argv[1]
    exe = os.environ["DLCC_EXE"]
    with tempfile.TemporaryDirectory() as tmp:
        arts = {}
        for target in ("cuda:sm_80", "x86-64"):
            arts[target] = os.path.join(tmp, target.replace(":", "_") + ".so")
            subprocess.run([exe, "compile", model, "--target", target, "--no-cache", "-o",
                            arts[target]], check=True)
        g = dlcc.load(arts["cuda:sm_80"]).session()
        c = dlcc.load(arts["x86-64"]).session()
        assert g.device == "cuda", g.device
        assert all(d.device == "cuda" for d in g.model.inputs + g.model.params)
        for name in g.params:
            assert np.array_equal(g.get_param(name), c.get_param(name)), name
        rng = np.random.default_rng(0)
        inputs = {}
        for d in g.model.inputs:
            inputs[d.name] = (rng.standard_normal(d.shape).astype(d.dtype)
                              if d.dtype_name.startswith("float")
                              else np.zeros(d.shape, dtype=d.dtype))
        for name, a in inputs.items():
            g.set_input(name, a)  # default zero-copy: a CUDA session copies
        outs = g.infer(**inputs)
        assert set(outs) == {d.name for d in g.model.outputs}
        for d in g.model.outputs:
            assert outs[d.name].shape == tuple(d.shape)
        try:
            g.output(g.model.outputs[0].name, copy=False)
            raise AssertionError("a view of GPU memory was handed out")
        except dlcc.Error as e:
            assert "cuda" in str(e), e
        ckpt = os.path.join(tmp, "g.safetensors")
        g.save(ckpt)
        c.load(ckpt)
        for name in g.params:
            assert np.array_equal(g.get_param(name), c.get_param(name)), name
        g.close()
        c.close()
    print("ok")


if __name__ == "__main__":
    main()
