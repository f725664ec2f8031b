#!/usr/bin/python3
"""Tests of the Python binding python/dlcc/ (ctypes over libdlrt, `dlcc compile` for compiling).

    test_binding.py [--sample]

Without arguments: the unit tests (compile + infer against `dlcc run`, train steps, params,
hparams, checkpoints, zero-copy inputs, output views, errors). With --sample: a limited
1-epoch run of samples/train_fmnist.py that must print its epoch and accuracy lines.

Finds the native parts through $DLCC_BUILD_DIR (or $DLCC_EXE / $DLRT_LIBRARY, as tests.cmake
sets them) and always compiles into a fresh temporary cache ($DLCC_CACHE_DIR is replaced).
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
import dlcc  # noqa: E402

MLP = os.path.join(REPO, "samples", "mlp_fmnist.dlg")
TMP = tempfile.TemporaryDirectory(prefix="dlcc-pytest-")
os.environ["DLCC_CACHE_DIR"] = os.path.join(TMP.name, "cache")
N = 8


def batch(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, 784), dtype=np.float32)
    y = rng.integers(0, 10, N).astype(np.int64)
    return x, y


class Binding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = dlcc.compile(MLP, dims={"N": N})

    def test_model_description(self):
        m = self.model
        self.assertEqual(m.name, "mlp_fmnist")
        self.assertEqual([d.name for d in m.inputs], ["x", "y"])
        self.assertEqual(m.inputs[0].shape, (N, 784))
        self.assertEqual(m.inputs[0].dtype, np.float32)
        self.assertEqual(m.inputs[1].dtype, np.int64)
        self.assertEqual([d.name for d in m.outputs], ["probs", "loss"])
        self.assertEqual(m.outputs[1].shape, ())
        self.assertEqual([d.name for d in m.params], ["w1", "b1", "w2", "b2"])
        self.assertTrue(m.has_train_step)
        self.assertIn("lr", m.hparams)

    def test_infer_matches_dlcc_run(self):
        x, y = batch(1)
        s = self.model.session(threads=2)
        out = s.infer(x=x, y=y)
        xp, yp = os.path.join(TMP.name, "x.npy"), os.path.join(TMP.name, "y.npy")
        pp, lp = os.path.join(TMP.name, "p.npy"), os.path.join(TMP.name, "l.npy")
        np.save(xp, x)
        np.save(yp, y)
        exe = dlcc._dlcc_exe()
        cmd = [exe, "run", MLP, "-D", f"N={N}", "--in", f"x={xp}", "--in", f"y={yp}"]
        cmd += ["--out", f"probs={pp}", "--out", f"loss={lp}"]
        subprocess.run(cmd, check=True, capture_output=True)
        # Same artifact (same cache key), same inputs: bit-identical.
        np.testing.assert_array_equal(out["probs"], np.load(pp))
        np.testing.assert_array_equal(out["loss"], np.load(lp))
        self.assertEqual(out["probs"].shape, (N, 10))
        np.testing.assert_allclose(out["probs"].sum(axis=1), 1.0, rtol=1e-5)

    def test_train_step_loss_decreases(self):
        x, y = batch(2)
        s = self.model.session(threads=1)
        infos = [s.train_step(x=x, y=y) for _ in range(6)]
        losses = [i.loss for i in infos]
        self.assertTrue(all(b < a for a, b in zip(losses, losses[1:])), losses)
        self.assertEqual([i.step for i in infos], list(range(1, 7)))
        self.assertFalse(any(i.skipped for i in infos))
        self.assertEqual(infos[-1].loss_scale, 1.0)
        self.assertGreater(infos[0].grad_norm, 0.0)
        self.assertEqual(s.get_hparam("step"), 6.0)

    def test_params_round_trip(self):
        s = self.model.session(threads=1)
        p = s.params
        self.assertEqual(sorted(p), ["b1", "b2", "w1", "w2"])
        w1 = p["w1"]
        self.assertEqual(w1.shape, (784, 256))
        self.assertEqual(w1.dtype, np.float32)
        self.assertTrue(np.any(w1 != 0))
        new = (w1 * np.float32(0.5)).astype(np.float32)
        s.set_param("w1", new)
        np.testing.assert_array_equal(s.params["w1"], new)
        # A non-contiguous array is accepted (copied to contiguous first).
        b1 = np.arange(512, dtype=np.float32)[::2]
        self.assertFalse(b1.flags.c_contiguous)
        s.params["b1"] = b1
        np.testing.assert_array_equal(s.get_param("b1"), b1)
        # Optimizer state is reachable too.
        self.assertEqual(s.get_param("w1.exp_avg").shape, (784, 256))
        # The returned params are copies: changing them changes nothing.
        w2 = s.params["w2"]
        w2[:] = 7
        self.assertFalse(np.all(s.params["w2"] == 7))

    def test_hparams(self):
        s = self.model.session(threads=1)
        self.assertAlmostEqual(s.get_hparam("lr"), 0.001)
        s.set_hparam("lr", 0.01)
        self.assertAlmostEqual(s.get_hparam("lr"), 0.01)
        with self.assertRaises(dlcc.Error) as cm:
            s.set_hparam("lr", -1.0)
        self.assertIn("lr", str(cm.exception))
        with self.assertRaises(dlcc.Error):
            s.get_hparam("no_such_hparam")

    def test_save_load_bit_identical(self):
        ckpt = os.path.join(TMP.name, "ckpt.safetensors")
        batches = [batch(10 + i) for i in range(4)]
        a = self.model.session(threads=2)
        for x, y in batches[:2]:
            a.train_step(x=x, y=y)
        a.save(ckpt)
        ia = [a.train_step(x=x, y=y) for x, y in batches[2:]]
        b = self.model.session(threads=1)  # fresh params, another thread count
        b.load(ckpt)
        self.assertEqual(b.get_hparam("step"), 2.0)
        ib = [b.train_step(x=x, y=y) for x, y in batches[2:]]
        self.assertEqual(ia, ib)  # loss, grad_norm, step: bit-identical
        for name in list(a.params) + ["w1.exp_avg", "w1.exp_avg_sq"]:
            np.testing.assert_array_equal(a.get_param(name), b.get_param(name))

    def test_contiguous_input_not_copied(self):
        x, _ = batch(3)
        d = self.model.inputs[0]
        self.assertIs(dlcc._as_buffer(d, x, "input"), x)
        xf = np.asfortranarray(x)
        c = dlcc._as_buffer(d, xf, "input")
        self.assertIsNot(c, xf)
        self.assertTrue(c.flags.c_contiguous)
        # A Fortran-ordered input gives the same result as the C-ordered one.
        x, y = batch(4)
        s = self.model.session(threads=1)
        r1 = s.infer(x=x, y=y)
        r2 = s.infer(x=np.asfortranarray(x), y=y)
        np.testing.assert_array_equal(r1["probs"], r2["probs"])

    def test_output_views(self):
        x, y = batch(5)
        s = self.model.session(threads=1)
        copy = s.infer(x=x, y=y)
        view = s.infer(copy=False, x=x, y=y)
        np.testing.assert_array_equal(copy["probs"], view["probs"])
        self.assertFalse(view["probs"].flags.writeable)
        self.assertTrue(copy["probs"].flags.writeable)

    def test_errors(self):
        s = self.model.session(threads=1)
        x, y = batch(6)
        with self.assertRaises(dlcc.Error) as cm:
            dlcc.compile(os.path.join(TMP.name, "missing.dlg"))
        self.assertIn("missing.dlg", str(cm.exception))
        self.assertIn("cannot read", str(cm.exception))
        with self.assertRaises(dlcc.Error) as cm:
            s.infer(x=x.astype(np.float64), y=y)
        self.assertIn("dtype float64 given, float32 expected", str(cm.exception))
        with self.assertRaises(dlcc.Error) as cm:
            s.infer(x=x[:4], y=y)
        self.assertIn("shape [4, 784] given, [8, 784] expected", str(cm.exception))
        with self.assertRaises(dlcc.Error) as cm:
            s.infer(x=x, y=y, z=y)
        self.assertIn("unknown input 'z'", str(cm.exception))
        with self.assertRaises(dlcc.Error) as cm:
            s.set_param("w1", np.zeros((3, 3), np.float32))
        self.assertIn("shape [3, 3] given", str(cm.exception))
        with self.assertRaises(dlcc.Error) as cm:
            s.get_param("nope")
        self.assertIn("unknown param 'nope'", str(cm.exception))
        # The runtime's own message (dlrt_last_error) is carried.
        with self.assertRaises(dlcc.Error) as cm:
            s.load(os.path.join(TMP.name, "missing.safetensors"))
        self.assertIn("missing.safetensors", str(cm.exception))
        with self.assertRaises(dlcc.Error) as cm:
            dlcc.load(os.path.join(TMP.name, "missing.so"))
        self.assertIn("missing.so", str(cm.exception))
        # A model error: dlcc's diagnostic with its location.
        bad = os.path.join(TMP.name, "bad.dlg")
        with open(bad, "w") as f:
            f.write("model bad\ninput x : float[4]\ny = Relu (q)\noutput y\n")
        with self.assertRaises(dlcc.Error) as cm:
            dlcc.compile(bad)
        self.assertIn("bad.dlg:3", str(cm.exception))
        s.close()
        with self.assertRaises(dlcc.Error):
            s.infer(x=x, y=y)


def run_sample():
    env = dict(os.environ, DLCC_FMNIST_LIMIT="2048", DLCC_FMNIST_TEST_LIMIT="2000")
    cmd = [sys.executable, os.path.join(REPO, "samples", "train_fmnist.py"), "--epochs", "1"]
    cmd += ["--threads", "2"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    print(p.stdout, end="")
    print(p.stderr, end="", file=sys.stderr)
    ok = p.returncode == 0
    ok = ok and re.search(r"^epoch 1: mean loss [0-9.]+, [0-9.]+ s, \d+ samples/s, skipped 0$",
                          p.stdout, re.M)
    m = re.search(r"^test accuracy: ([0-9.]+) \((\d+)/2000\)$", p.stdout, re.M)
    ok = ok and m and float(m.group(1)) > 0.6  # 16 steps of Adam on 2048 samples: ~0.7
    print("sample run:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--sample"]:
        sys.exit(run_sample())
    unittest.main(verbosity=2)
