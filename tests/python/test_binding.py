#!/usr/bin/python3
"""Tests of the Python binding python/dlcc/ (ctypes over libdlcc for compiling, libdlrt to run).

    test_binding.py [--sample]

Without arguments: the unit tests (compile + infer against `dlcc run`, train steps, params,
hparams, checkpoints, zero-copy input binding, output views, errors, and dlcc.Loader:
determinism, shuffling, padding, normalisation, limit / n_classes, batch release, training
from a loader; Loader.arrays, named arrays). With --sample: a limited 1-epoch run of samples/train_fmnist.py that must print
its epoch, loader-wait and accuracy lines.

Finds the native parts through $DLCC_BUILD_DIR (or $DLCC_LIBRARY / $DLRT_LIBRARY, as tests.cmake
sets them, and $DLCC_EXE for the `dlcc run` it compares with) and always compiles into a fresh
temporary cache ($DLCC_CACHE_DIR is replaced).
"""

import ctypes
import gc
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest
import weakref

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

    def test_flush_denormals(self):
        # 1e-20 * 1e-20 underflows: a denormal by default, 0 with flush_denormals=True, on every
        # thread of the step (2 threads), and the option is strictly a bool.
        path = os.path.join(TMP.name, "denormal.dlg")
        with open(path, "w") as f:
            f.write("model denormal\ninput x : float[4]\ninput s : float[4]\n"
                    "y = Mul (x, s)\noutput y\n")
        m = dlcc.compile(path)
        x = np.array([1e-20, 3e-20, 2.0, -1e-20], np.float32)
        sc = np.array([1e-20, 1e-20, 0.5, 1e-20], np.float32)
        plain = m.session(threads=2).infer(x=x, s=sc)["y"]
        flushed = m.session(threads=2, flush_denormals=True).infer(x=x, s=sc)["y"]
        np.testing.assert_array_equal(plain, x * sc)
        self.assertTrue(0 < plain[0] < np.finfo(np.float32).tiny)
        self.assertEqual(flushed.tolist(), [0.0, 0.0, 1.0, 0.0])
        with self.assertRaises(dlcc.ArgumentTypeError):
            m.session(flush_denormals=1)

    def test_compile_in_process_through_the_cache(self):
        # setUpClass compiled this model into the test's fresh cache: the same compile is now a
        # lookup, and gives the same artifact (the same outputs).
        again = dlcc.compile(MLP, dims={"N": N})
        self.assertTrue(again.cache_hit)
        x, y = batch(11)
        a = self.model.session(threads=1).infer(x=x, y=y)["probs"]
        b = again.session(threads=1).infer(x=x, y=y)["probs"]
        np.testing.assert_array_equal(a, b)
        fresh = dlcc.compile(MLP, dims={"N": N}, use_cache=False)
        self.assertFalse(fresh.cache_hit)
        other = dlcc.compile(MLP, dims={"N": 2 * N})
        self.assertFalse(other.cache_hit)  # another dim value, another key
        self.assertEqual(other.inputs[0].shape, (2 * N, 784))

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
        # Where the code runs and the tensors live (artifact format 5's device kind).
        self.assertEqual(m.device, "cpu")
        self.assertEqual({d.device for d in m.inputs + m.outputs + m.params}, {"cpu"})
        with m.session(threads=1) as s:
            self.assertEqual(s.device, "cpu")

    def test_infer_matches_dlcc_run(self):
        x, y = batch(1)
        s = self.model.session(threads=2)
        out = s.infer(x=x, y=y)
        xp, yp = os.path.join(TMP.name, "x.npy"), os.path.join(TMP.name, "y.npy")
        pp, lp = os.path.join(TMP.name, "p.npy"), os.path.join(TMP.name, "l.npy")
        np.save(xp, x)
        np.save(yp, y)
        exe = os.environ.get("DLCC_EXE") or os.path.join(dlcc._build_dir(), "dlcc")
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

    def test_chunks(self):
        # A session of 2 chunks (dlrt_session_set_chunks) given the same batch twice: the chunks'
        # gradients sum to 2g and the all-reduce's scale 1/2 gives g back exactly, so its steps
        # equal an ordinary session's bit for bit; one batch alone is refused.
        x, y = batch(4)
        a, b = self.model.session(threads=1), self.model.session(threads=2)
        b.set_chunks(2)
        for _ in range(3):
            ia = a.train_step(x=x, y=y)
            ib = b.train_step(x=np.concatenate([x, x]), y=np.concatenate([y, y]))
            self.assertEqual((ia.loss, ia.grad_norm), (ib.loss, ib.grad_norm))
        for n in ("w1", "b1", "w2", "b2"):
            self.assertEqual(a.params[n].tobytes(), b.params[n].tobytes(), n)
        with self.assertRaisesRegex(dlcc.Error, r"shape \[%d, 784\] given, \[%d, 784\]" % (N, 2 * N)):
            b.train_step(x=x, y=y)
        b.set_chunks(1)
        b.train_step(x=x, y=y)  # one batch again
        with self.assertRaises(dlcc.ArgumentError):
            b.set_chunks(0)

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

    def test_load_a_pytorch_state_dict(self):
        # safetensors as safetensors.torch.save_file writes it: PyTorch's names, F32 / I64.
        rng = np.random.default_rng(5)
        tensors = {
            "fc1.weight": rng.standard_normal((784, 256)).astype(np.float32),
            "fc1.bias": rng.standard_normal(256).astype(np.float32),
            "bn.num_batches_tracked": np.array(3, dtype=np.int64),
        }
        header, blobs, at = {}, [], 0
        for name, a in tensors.items():
            b = a.tobytes()
            dt = "F32" if a.dtype == np.float32 else "I64"
            header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
            blobs.append(b)
            at += len(b)
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        path = os.path.join(TMP.name, "torch.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
        s = self.model.session(threads=1)
        w2 = s.get_param("w2")
        with self.assertRaises(dlcc.Error) as cm:
            s.load(path)
        self.assertIn("has no param or optimizer state named 'fc1.weight'", str(cm.exception))
        notes = s.load(path, rename={"fc1.weight": "w1", "fc1.bias": "b1"})
        self.assertIn(("bn.num_batches_tracked", "skipped: a PyTorch-only buffer (BatchNorm's "
                       "step counter)"), notes)
        self.assertIn(("w2", "not in the checkpoint: keeps its current value"), notes)
        self.assertEqual(len(notes), 3)  # num_batches_tracked, w2, b2
        np.testing.assert_array_equal(s.get_param("w1"), tensors["fc1.weight"])
        np.testing.assert_array_equal(s.get_param("b1"), tensors["fc1.bias"])
        np.testing.assert_array_equal(s.get_param("w2"), w2)
        self.assertTrue("w1" in s.params)
        self.assertFalse("fc1.weight" in s.params)
        self.assertFalse(3 in s.params)
        with self.assertRaises(dlcc.ArgumentTypeError):
            s.load(path, rename=[("a",)])

    def test_contiguous_input_not_copied(self):
        x, _ = batch(3)
        d = self.model.inputs[0]
        self.assertIs(dlcc._bindable(d, x, "input"), x)
        xf = np.asfortranarray(x)
        c = dlcc._bindable(d, xf, "input")
        self.assertIsNot(c, xf)
        self.assertTrue(c.flags.c_contiguous)
        # A Fortran-ordered input gives the same result as the C-ordered one.
        x, y = batch(4)
        s = self.model.session(threads=1)
        r1 = s.infer(x=x, y=y)
        r2 = s.infer(x=np.asfortranarray(x), y=y)
        np.testing.assert_array_equal(r1["probs"], r2["probs"])

    def test_zero_copy_bind(self):
        x, y = batch(20)
        x2, _ = batch(21)
        ref = self.model.session(threads=1)  # fed by copy: the expected results
        ref.set_input("y", y, copy=True)
        ref.set_input("x", x, copy=True)
        p1 = ref.infer()["probs"]
        ref.set_input("x", x2, copy=True)
        p2 = ref.infer()["probs"]
        self.assertFalse(np.array_equal(p1, p2))

        s = self.model.session(threads=2)
        a = x.copy()
        np.testing.assert_array_equal(s.infer(x=a, y=y)["probs"], p1)
        self.assertIs(s._bound["x"], a)  # bound by pointer, not copied
        a[:] = x2  # in place: the session reads this memory
        np.testing.assert_array_equal(s.infer()["probs"], p2)
        a[:] = x
        np.testing.assert_array_equal(s.infer()["probs"], p1)
        # The session keeps the bound array alive, and drops it when x is rebound.
        w = weakref.ref(a)
        del a
        gc.collect()
        self.assertIsNotNone(w())
        np.testing.assert_array_equal(s.infer()["probs"], p1)
        b = x2.copy()
        s.set_input("x", b)
        gc.collect()
        self.assertIsNone(w())
        np.testing.assert_array_equal(s.infer()["probs"], p2)
        # Set by copy: the reference is dropped and later changes are not seen.
        s.set_input("x", b, copy=True)
        self.assertNotIn("x", s._bound)
        b[:] = x
        np.testing.assert_array_equal(s.infer()["probs"], p2)

        # train_step() with no inputs steps on the bound arrays' current contents.
        t_ref = self.model.session(threads=1)
        t = self.model.session(threads=1)
        c = x.copy()
        self.assertEqual(t.train_step(x=c, y=y), t_ref.train_step(x=x.copy(), y=y))
        c[:] = x2
        self.assertEqual(t.train_step(), t_ref.train_step(x=x2.copy(), y=y))

    def test_bind_non_contiguous_and_misaligned(self):
        x, y = batch(22)
        want = self.model.session(threads=1).infer(x=x, y=y)["probs"]
        s = self.model.session(threads=1)
        # Non-contiguous: copied once into an array the session keeps and binds.
        big = np.zeros((N, 2 * 784), np.float32)
        big[:, ::2] = x
        nc = big[:, ::2]
        self.assertFalse(nc.flags.c_contiguous)
        np.testing.assert_array_equal(s.infer(x=nc, y=y)["probs"], want)
        kept = s._bound["x"]
        self.assertIsNot(kept, nc)
        self.assertTrue(kept.flags.c_contiguous)
        nc[:] = 0  # the copy is what is bound: the original's changes are not seen
        np.testing.assert_array_equal(s.infer()["probs"], want)
        # Misaligned (contiguous but 1 byte off): copied too, the runtime never sees it.
        raw = np.zeros(x.nbytes + 4, np.uint8)
        mis = np.frombuffer(raw.data, np.float32, count=x.size, offset=1).reshape(x.shape)
        raw[1 : 1 + x.nbytes] = x.view(np.uint8).ravel()
        self.assertNotEqual(mis.ctypes.data % 4, 0)
        s2 = self.model.session(threads=1)
        np.testing.assert_array_equal(s2.infer(x=mis, y=y)["probs"], want)
        self.assertEqual(s2._bound["x"].ctypes.data % 4, 0)
        # A wrong dtype is refused, not converted, and leaves the binding as it was.
        with self.assertRaises(dlcc.Error) as cm:
            s.set_input("y", y.astype(np.int32))
        self.assertIn("dtype int32 given, int64 expected", str(cm.exception))
        np.testing.assert_array_equal(s.infer()["probs"], want)
        # Memory overlapping an output buffer is refused (steps write there).
        a = x.copy()
        s._out_ranges.append((a.ctypes.data + 16, a.ctypes.data + 32, "probs"))
        with self.assertRaises(dlcc.Error) as cm:
            s.set_input("x", a)
        self.assertIn("overlaps output 'probs'", str(cm.exception))

    def test_output_views(self):
        x, y = batch(5)
        s = self.model.session(threads=1)
        copy = s.infer(x=x, y=y)
        view = s.infer(copy=False, x=x, y=y)
        np.testing.assert_array_equal(copy["probs"], view["probs"])
        self.assertFalse(view["probs"].flags.writeable)
        self.assertTrue(copy["probs"].flags.writeable)
        # A copy comes through dlrt_session_output_copy (any device): the same bytes, its own
        # memory.
        one = s.output("loss")
        np.testing.assert_array_equal(one, view["loss"])
        self.assertEqual(one.shape, ())
        self.assertFalse(np.shares_memory(one, view["loss"]))

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
        self.assertIn("bad.dlg:3:", str(cm.exception))
        self.assertIn("error:", str(cm.exception))
        with self.assertRaises(dlcc.Error) as cm:
            dlcc.compile(MLP, dims={"N": "eight"})
        self.assertIn("dims: every value must be an integer", str(cm.exception))
        with self.assertRaises(dlcc.Error) as cm:
            dlcc.compile(MLP, dims={"N": N}, opt_level=7)
        self.assertIn("7", str(cm.exception))
        s.close()
        with self.assertRaises(dlcc.Error):
            s.infer(x=x, y=y)


def collect(loader, n):
    """Copies of the next n batches: [(x, y, n_valid, epoch, index)]."""
    out = []
    for _ in range(n):
        with loader.next() as b:
            out.append((b.x.copy(), b.y.copy(), b.n_valid, b.epoch, b.index))
    return out


class LoaderTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rng = np.random.default_rng(7)
        d = os.path.join(TMP.name, "loader")
        os.makedirs(d, exist_ok=True)
        cls.n = 50
        cls.x = rng.integers(0, 256, (cls.n, 3, 4, 5)).astype(np.uint8)  # [C, H, W] samples
        cls.y = rng.integers(0, 10, cls.n).astype(np.int64)
        cls.y[0] = 9
        cls.y[17] = 9  # labels 0..9; with n_classes=5 the first bad one is found in order
        cls.xp, cls.yp = os.path.join(d, "x.npy"), os.path.join(d, "y.npy")
        np.save(cls.xp, cls.x)
        np.save(cls.yp, cls.y)

    def loader(self, **opts):
        return dlcc.Loader.npy(self.xp, self.yp, **opts)

    def test_ctypes_layout(self):
        # The mirrors must match runtime/dlrt.h's structs (x86-64 / LP64 sizes and offsets).
        self.assertEqual(ctypes.sizeof(dlcc._TensorDesc), 96)
        self.assertEqual(dlcc._TensorDesc.device.offset, 88)
        self.assertEqual(ctypes.sizeof(dlcc._LoaderOptions), 248)
        self.assertEqual(dlcc._LoaderOptions.limit.offset, 200)
        self.assertEqual(dlcc._LoaderOptions.n_classes.offset, 208)
        self.assertEqual(dlcc._LoaderOptions.shard_count.offset, 216)
        self.assertEqual(dlcc._LoaderOptions.u8_to_unit.offset, 232)
        self.assertEqual(dlcc._LoaderOptions.start_batch.offset, 240)
        self.assertEqual(ctypes.sizeof(dlcc._LoaderBatch), 72)
        self.assertEqual(ctypes.sizeof(dlcc._LoaderStats), 32)
        self.assertEqual(ctypes.sizeof(dlcc._LoaderInfo), 240)
        self.assertEqual(ctypes.sizeof(dlcc._LoaderArray), 128)
        self.assertEqual(dlcc._LoaderArray.mean.offset, 112)
        self.assertEqual(ctypes.sizeof(dlcc._LoaderArrayInfo), 128)
        self.assertEqual(dlcc._LoaderArrayInfo.mean.offset, 112)
        self.assertEqual(dlcc._LoaderInfo.epoch_samples.offset, 232)
        self.assertEqual(ctypes.sizeof(dlcc._Guard), 56)
        self.assertEqual(ctypes.sizeof(dlcc._TrainEvent), 176)
        self.assertEqual(dlcc._TrainEvent.info.offset, 72)
        self.assertEqual(dlcc._TrainEvent.guard.offset, 128)
        self.assertEqual(dlcc._TrainEvent.run_s.offset, 168)
        self.assertEqual(ctypes.sizeof(dlcc._TrainOptions), 104)
        self.assertEqual(dlcc._TrainOptions.callback.offset, 56)
        self.assertEqual(dlcc._TrainOptions.start_step.offset, 72)
        self.assertEqual(dlcc._TrainOptions.start_guard.offset, 96)
        self.assertEqual(ctypes.sizeof(dlcc._TrainResult), 32)

    def test_info_and_views(self):
        with self.loader(batch_size=8, seed=1) as l:
            i = l.info
            self.assertEqual(i.n_samples, 50)
            self.assertEqual(i.batches_per_epoch, 6)  # drop last: floor(50 / 8)
            self.assertEqual(i.sample_dims, (3, 4, 5))
            self.assertEqual(i.sample_numel, 60)
            # Without normalisation: one channel, mean 0, std 1 (the values applied).
            self.assertEqual((i.n_channels, i.mean, i.std), (1, (0.0,), (1.0,)))
            b = l.next()
            self.assertEqual(b.x.shape, (8, 3, 4, 5))
            self.assertEqual(b.x.dtype, np.float32)
            self.assertEqual(b.y.shape, (8,))
            self.assertEqual(b.y.dtype, np.int64)
            self.assertFalse(b.x.flags.writeable)
            self.assertFalse(b.x.flags.owndata)  # a view of the loader's slot
            self.assertEqual((b.epoch, b.index, b.seq, b.n_valid), (0, 0, 0, 8))
            b.release()
            self.assertTrue(b.released)
            with self.assertRaises(dlcc.Error) as cm:
                b.x
            self.assertIn("released", str(cm.exception))
            b.release()  # idempotent
            self.assertEqual(l.stats.batches, 1)
        with self.loader(batch_size=8, label_dtype=np.int32) as l, l.next() as b:
            self.assertEqual(b.y.dtype, np.int32)
            self.assertEqual(l.label_dtype, np.int32)
        with dlcc.Loader.npy(self.xp, batch_size=8) as l, l.next() as b:
            self.assertIsNone(b.y)

    def test_deterministic_across_producers(self):
        opts = dict(batch_size=8, seed=42, last="pad", normalize="compute", hflip=True, crop_pad=1)
        runs = []
        for producers, slots in ((1, 1), (4, 3)):
            with self.loader(producers=producers, slots=slots, **opts) as l:
                runs.append(collect(l, 16))  # 7 batches per epoch: more than two epochs
        for (xa, ya, *ma), (xb, yb, *mb) in zip(*runs):
            np.testing.assert_array_equal(xa, xb)
            np.testing.assert_array_equal(ya, yb)
            self.assertEqual(ma, mb)
        with self.loader(producers=2, **dict(opts, seed=43)) as l:
            other = collect(l, 1)
        self.assertFalse(np.array_equal(other[0][0], runs[0][0][0]))

    def test_shuffle_is_a_permutation(self):
        B = 8
        with self.loader(batch_size=B, seed=5, producers=2, scale=0.5) as l:
            orders = []
            for epoch in range(2):
                order = [l.sample_index(epoch, p) for p in range(self.n)]
                self.assertEqual(sorted(order), list(range(self.n)))
                orders.append(order)
            self.assertNotEqual(orders[0], orders[1])
            self.assertNotEqual(orders[0], list(range(self.n)))
            for epoch in range(2):
                for index in range(l.info.batches_per_epoch):
                    with l.next() as b:
                        self.assertEqual((b.epoch, b.index), (epoch, index))
                        idx = orders[epoch][index * B : (index + 1) * B]
                        np.testing.assert_array_equal(b.x, self.x[idx].astype(np.float32) * 0.5)
                        np.testing.assert_array_equal(b.y, self.y[idx])
            with self.assertRaises(dlcc.Error):
                l.sample_index(0, self.n)
        with self.loader(batch_size=B, shuffle=False) as l:
            self.assertEqual([l.sample_index(3, p) for p in range(self.n)], list(range(self.n)))

    def test_pad_last_and_epochs(self):
        with self.loader(batch_size=8, shuffle=False, last="pad", pad_label=-3, epochs=1) as l:
            self.assertEqual(l.info.batches_per_epoch, 7)
            got = []
            for b in l:
                got.append((b.n_valid, b.x.copy(), b.y.copy()))
            self.assertIsNone(l.next())  # the end, and it stays the end
            self.assertIsNone(l.next())
        self.assertEqual([g[0] for g in got], [8] * 6 + [2])
        x = np.concatenate([g[1][: g[0]] for g in got])
        y = np.concatenate([g[2][: g[0]] for g in got])
        np.testing.assert_array_equal(x, self.x.astype(np.float32))
        np.testing.assert_array_equal(y, self.y)
        np.testing.assert_array_equal(got[-1][1][2:], 0)
        np.testing.assert_array_equal(got[-1][2][2:], -3)

    def test_normalize(self):
        scale = 1 / 255
        xs = self.x.astype(np.float32) * np.float32(scale)
        mean = xs.mean(axis=(0, 2, 3), dtype=np.float64)
        std = xs.std(axis=(0, 2, 3), dtype=np.float64)
        with self.loader(batch_size=10, shuffle=False, scale=scale, normalize="compute") as l:
            self.assertEqual(l.info.n_channels, 3)  # [C, H, W] samples: per channel
            np.testing.assert_allclose(l.info.mean, mean, rtol=1e-5)
            np.testing.assert_allclose(l.info.std, std, rtol=1e-5)
            with l.next() as b:
                m = np.array(l.info.mean, np.float32)[:, None, None]
                sd = np.array(l.info.std, np.float32)[:, None, None]
                np.testing.assert_allclose(b.x, (xs[:10] - m) / sd, rtol=1e-5, atol=1e-5)
        given = ([0.5, 0.25, 0.0], (2.0, 4.0, 1.0))
        with self.loader(batch_size=10, shuffle=False, normalize=given) as l, l.next() as b:
            self.assertEqual(l.info.mean, (0.5, 0.25, 0.0))
            want = (self.x[:10].astype(np.float32) - np.float32([0.5, 0.25, 0])[:, None, None])
            want /= np.float32([2, 4, 1])[:, None, None]
            np.testing.assert_allclose(b.x, want, rtol=1e-6)
        with self.loader(batch_size=10, shuffle=False, normalize=(1.0, 2.0)) as l, l.next() as b:
            np.testing.assert_allclose(b.x, (self.x[:10].astype(np.float32) - 1) / 2, rtol=1e-6)

    def test_limit_and_n_classes(self):
        with self.loader(batch_size=4, limit=20, seed=3) as l:
            self.assertEqual(l.info.n_samples, 20)
            self.assertEqual(l.info.batches_per_epoch, 5)
            self.assertEqual(sorted(l.sample_index(0, p) for p in range(20)), list(range(20)))
        with self.loader(batch_size=4, n_classes=10) as l:  # every label in range
            self.assertEqual(l.info.n_samples, 50)
        with self.assertRaises(dlcc.Error) as cm:
            self.loader(batch_size=4, n_classes=5)
        first_bad = int(np.argmax(self.y >= 5))
        self.assertIn(
            f"label {self.y[first_bad]} of sample {first_bad} is outside [0, 5)",
            str(cm.exception),
        )
        # limit is applied first: the first 10 samples' labels may be checked alone.
        ok = [i for i in range(1, self.n) if self.y[i] >= 5][0]
        with self.loader(batch_size=1, limit=ok, n_classes=10) as l:
            self.assertEqual(l.info.n_samples, ok)

    def test_shards_and_u8_to_unit(self):
        # Two shards of the 50 samples: 25 positions each, together every sample once.
        seen = []
        for r in range(2):
            with self.loader(batch_size=5, seed=4, shard_count=2, shard_index=r) as l:
                self.assertEqual((l.info.n_samples, l.info.epoch_samples), (50, 25))
                self.assertEqual(l.info.batches_per_epoch, 5)
                seen += [l.sample_index(1, p) for p in range(25)]
        self.assertEqual(sorted(seen), list(range(50)))
        with self.assertRaises(dlcc.Error) as cm:
            self.loader(shard_count=2, shard_index=2)
        self.assertIn("shard_index 2 must lie in 0..shard_count-1", str(cm.exception))
        with self.assertRaises(dlcc.ArgumentTypeError):
            self.loader(u8_to_unit=1)
        # u8_to_unit: the uint8 samples become x * (1 / 255) in float32.
        with self.loader(batch_size=50, shuffle=False, u8_to_unit=True) as l:
            b = l.next()
            want = self.x.astype(np.float32) * (np.float32(1) / np.float32(255))
            np.testing.assert_array_equal(np.asarray(b.x), want)
            b.release()

    def test_bad_options(self):
        cases = [
            (dict(batch_size=0), "batch_size must be >= 1 (got 0)"),
            (dict(producers=0), "producers must be in 1..256 (got 0)"),
            (dict(slots=2000), "slots must be in 1..1024"),
            (dict(batch_size=64), "data loader"),  # 50 samples make no full batch of 64
            (dict(last="keep"), "'drop' or 'pad' expected"),
            (dict(normalize="z"), "'none', 'compute' or (mean, std) expected"),
            (dict(normalize=([0.0, 1.0], [1.0])), "mean and std need the same number"),
            (dict(normalize=(0.0, -1.0)), "finite std > 0"),
            (dict(label_dtype=np.float32), "np.int64 or np.int32 expected"),
            (dict(batch_size=8.0), "batch_size: an integer expected"),
            (dict(producers=2**40), "out of range"),
            (dict(shuffle=1), "True or False expected"),
            (dict(limit=-1), "limit must be >= 0"),
            (dict(batchsize=8), "unknown loader option 'batchsize'"),
        ]
        for opts, msg in cases:
            with self.subTest(opts=opts):
                with self.assertRaises(dlcc.Error) as cm:
                    self.loader(**opts)
                self.assertIn(msg, str(cm.exception))
        with self.assertRaises(dlcc.Error) as cm:
            dlcc.Loader.npy(os.path.join(TMP.name, "nope.npy"))
        self.assertIn("nope.npy", str(cm.exception))
        with self.assertRaises(dlcc.Error) as cm:
            dlcc.Loader.idx(self.xp)  # a .npy file is no IDX file
        self.assertIn("x.npy", str(cm.exception))

    def test_release_and_iteration(self):
        with self.loader(batch_size=8, slots=2, seed=1) as l:
            held = [l.next(), l.next()]
            with self.assertRaises(dlcc.Error) as cm:
                l.next()  # both slots held: an error, not a hang
            self.assertIn("still held", str(cm.exception))
            for b in held:
                b.release()
            # Iteration releases each batch when the next is taken: 2 slots suffice for 20.
            prev = None
            for i, b in enumerate(l):
                if prev is not None:
                    self.assertTrue(prev.released)
                prev = b
                if i == 19:
                    break
            self.assertTrue(prev.released)  # leaving the loop released the last one
            self.assertEqual(l.stats.batches, 22)
            self.assertGreaterEqual(l.stats.max_wait_ms, l.stats.mean_wait_ms)
        with self.assertRaises(dlcc.Error) as cm:
            l.next()
        self.assertIn("closed", str(cm.exception))
        # A view keeps the loader's memory alive after close (it is freed with the last view).
        l = self.loader(batch_size=8, shuffle=False)
        b = l.next()
        x = b.x
        l.close()
        del l, b
        gc.collect()
        np.testing.assert_array_equal(x, self.x[:8].astype(np.float32))


class LoaderTraining(unittest.TestCase):
    def test_training_from_a_loader(self):
        # samples/mlp_fmnist.dlg with N = 64, fed zero-copy from a loader over small .npy files,
        # against the same batches fed by copy: the same losses and params, bit for bit.
        B = 64
        model = dlcc.compile(MLP, dims={"N": B})
        rng = np.random.default_rng(11)
        x = rng.standard_normal((300, 784), dtype=np.float32)
        y = rng.integers(0, 10, 300).astype(np.int64)
        xp, yp = os.path.join(TMP.name, "tx.npy"), os.path.join(TMP.name, "ty.npy")
        np.save(xp, x)
        np.save(yp, y)
        zero_copy = model.session(threads=2)
        by_copy = model.session(threads=1)
        losses_a, losses_b = [], []
        with dlcc.Loader.npy(xp, yp, batch_size=B, producers=2, seed=9, n_classes=10) as l:
            for step, b in enumerate(l):
                if step == 6:  # 4 batches per epoch: into the second epoch
                    break
                losses_a.append(zero_copy.train_step(x=b.x, y=b.y))
                self.assertIs(zero_copy._bound["x"], b.x)  # bound by pointer
                by_copy.set_input("x", b.x, copy=True)
                by_copy.set_input("y", b.y, copy=True)
                losses_b.append(by_copy.train_step())
        self.assertEqual(losses_a, losses_b)
        self.assertLess(losses_a[-1].loss, losses_a[0].loss)
        for name in zero_copy.params:
            np.testing.assert_array_equal(zero_copy.get_param(name), by_copy.get_param(name))


class NamedArrayLoader(unittest.TestCase):
    """dlcc.Loader.arrays: named arrays (libdlrt's dlrt_loader_create_arrays) from ndarrays and
    .npy files, each batch a dict of zero-copy views."""

    def setUp(self):
        rng = np.random.default_rng(21)
        self.X = (rng.standard_normal((100, 3, 2, 2)) * [[[2.0]], [[0.5]], [[7.0]]] + 4)
        self.T = rng.standard_normal((100, 1)).astype(np.float32)
        self.Y = rng.integers(0, 10, 100).astype(np.int32)

    def test_rows_normalisation_and_dtypes(self):
        # Each batch's rows are the samples sample_index names, in every array; "compute"
        # normalises per channel (first per-sample dim) with the population std, float64 data
        # arrive as float32, int32 labels stay int32, the targets come from a .npy file.
        tp = os.path.join(TMP.name, "named_t.npy")
        np.save(tp, self.T)
        X = self.X.astype(np.float32)
        mean = X.transpose(1, 0, 2, 3).reshape(3, -1).mean(1)
        std = X.transpose(1, 0, 2, 3).reshape(3, -1).std(1)
        with dlcc.Loader.arrays({"x": self.X, "t": tp, "y": self.Y}, batch_size=16, seed=4,
                                normalize={"x": "compute"}, n_classes={"y": 10},
                                epochs=2) as l:
            x_info, t_info, y_info = l.arrays_info
            self.assertEqual((x_info.name, x_info.dtype, x_info.sample_dims, x_info.n_channels),
                             ("x", np.float32, (3, 2, 2), 3))
            self.assertEqual((t_info.path, t_info.dtype, t_info.n_channels), (tp, np.float32, 0))
            self.assertEqual((y_info.dtype, y_info.sample_dims), (np.int32, ()))
            np.testing.assert_allclose(x_info.mean, mean, rtol=1e-5)
            np.testing.assert_allclose(x_info.std, std, rtol=1e-5)
            self.assertFalse(os.path.exists(x_info.path))  # the temporary file is gone
            self.assertEqual(l.info.batches_per_epoch, 6)
            seen = 0
            for b in l:
                self.assertIsNone(b.x)
                self.assertEqual(sorted(b.arrays), ["t", "x", "y"])
                idx = [l.sample_index(b.epoch, b.index * 16 + j) for j in range(16)]
                want = (X[idx] - mean[None, :, None, None]) / std[None, :, None, None]
                np.testing.assert_allclose(b["x"], want, rtol=1e-5, atol=1e-5)
                np.testing.assert_array_equal(b["t"], self.T[idx])
                np.testing.assert_array_equal(b["y"], self.Y[idx])
                self.assertEqual(b["y"].dtype, np.int32)
                self.assertFalse(b["x"].flags.writeable)
                seen += 1
            self.assertEqual(seen, 12)
        with dlcc.Loader.arrays({"x": self.X}, batch_size=10, normalize={"x": "global"}) as l:
            self.assertEqual(l.arrays_info[0].n_channels, 1)
        with dlcc.Loader.arrays({"x": self.X}, batch_size=10, shuffle=False,
                                normalize={"x": ([1, 2, 3], [2, 2, 2])}) as l, l.next() as b:
            np.testing.assert_allclose(
                b["x"], (self.X[:10] - np.array([1, 2, 3])[None, :, None, None]) / 2, rtol=1e-6)
        with dlcc.Loader.arrays({"y": self.Y}, dtypes={"y": np.int64}, batch_size=10) as l:
            self.assertEqual(l.next()["y"].dtype, np.int64)

    def test_trains_zero_copy(self):
        # samples/mlp_fmnist.dlg fed with session.train_step(**b.arrays): the same losses as the
        # same batches given by copy.
        model = dlcc.compile(MLP, dims={"N": 32})
        rng = np.random.default_rng(2)
        x = rng.standard_normal((128, 784), dtype=np.float32)
        y = rng.integers(0, 10, 128)
        a, c = model.session(threads=2), model.session(threads=1)
        la, lc = [], []
        with dlcc.Loader.arrays({"x": x, "y": y}, batch_size=32, seed=1, epochs=2) as l:
            for b in l:
                la.append(a.train_step(**b.arrays).loss)
                self.assertIs(a._bound["x"], b["x"])
                c.set_input("x", b["x"], copy=True)
                c.set_input("y", b["y"], copy=True)
                lc.append(c.train_step().loss)
        self.assertEqual(len(la), 8)
        self.assertEqual(la, lc)
        self.assertLess(la[-1], la[0])

    def test_errors(self):
        with self.assertRaises(dlcc.ArgumentTypeError):
            dlcc.Loader.arrays([self.X])
        with self.assertRaises(dlcc.ArgumentTypeError):
            dlcc.Loader.arrays({})
        with self.assertRaisesRegex(dlcc.ArgumentError, "'z' is not one of the arrays"):
            dlcc.Loader.arrays({"x": self.X}, normalize={"z": "compute"})
        with self.assertRaisesRegex(dlcc.ArgumentError, "np.float32, np.int32 or np.int64"):
            dlcc.Loader.arrays({"x": self.X}, dtypes={"x": np.float16})
        with self.assertRaisesRegex(dlcc.ArgumentError, "'none', 'compute', 'global'"):
            dlcc.Loader.arrays({"x": self.X}, normalize={"x": "minmax"})
        with self.assertRaisesRegex(dlcc.Error, "input 'y'"):  # the runtime's message
            dlcc.Loader.arrays({"x": self.X, "y": self.Y[:99]}, batch_size=10)
        with self.assertRaisesRegex(dlcc.Error, "y"):
            dlcc.Loader.arrays({"y": self.Y}, n_classes={"y": 5}, batch_size=10)
        with dlcc.Loader.arrays({"x": self.X}, batch_size=10) as l:
            b = l.next()
            b.release()
            with self.assertRaisesRegex(dlcc.ArgumentError, "was released"):
                b["x"]
            with self.assertRaisesRegex(dlcc.ArgumentError, "no array 'q'"):
                l.next()["q"]


class RuntimeTrainingLoop(unittest.TestCase):
    def test_train_matches_hand_loop_and_evaluates(self):
        # Session.train (the runtime's dlrt_train_run) on a loader against the same batches
        # stepped by hand with the same schedule: the same losses and params, bit for bit; the
        # callback sees every batch, step and epoch; evaluate_accuracy counts real rows only.
        B = 64
        model = dlcc.compile(MLP, dims={"N": B})
        rng = np.random.default_rng(5)
        x = rng.standard_normal((300, 784), dtype=np.float32)
        y = rng.integers(0, 10, 300).astype(np.int64)
        xp, yp = os.path.join(TMP.name, "lx.npy"), os.path.join(TMP.name, "ly.npy")
        np.save(xp, x)
        np.save(yp, y)
        opts = dict(batch_size=B, seed=3, n_classes=10, epochs=2)
        lib_s, hand_s = model.session(threads=2), model.session(threads=2)
        events = []
        with dlcc.Loader.npy(xp, yp, **opts) as l:
            r = lib_s.train(l, "x", "y", epochs=2, schedule="cosine", lr=0.01,
                            callback=lambda ev: events.append(ev))
        self.assertEqual((r.steps, r.nonfinite, r.diverged, r.stopped), (8, 0, False, False))
        steps = [e for e in events if e.kind == "step"]
        self.assertEqual([e.kind for e in events].count("batch"), 8)
        self.assertEqual([e.epoch for e in events if e.kind == "epoch"], [0, 1])
        hand = []
        with dlcc.Loader.npy(xp, yp, **opts) as l:
            for t, b in enumerate(l):
                lr = dlcc.lr_at("cosine", 0.01, t, 8)
                self.assertEqual(lr, steps[t].lr)
                hand_s.set_hparam("lr", lr)
                hand.append(hand_s.train_step(x=b.x, y=b.y).loss)
        self.assertEqual([e.info.loss for e in steps], hand)
        for name in lib_s.params:
            np.testing.assert_array_equal(lib_s.get_param(name), hand_s.get_param(name))
        with dlcc.Loader.npy(xp, yp, batch_size=B, shuffle=False, last="pad", pad_label=0,
                             epochs=1) as t:
            correct, total = lib_s.evaluate_accuracy(t, "x", "y", "probs")
        self.assertEqual(total, 300)
        probs = []
        for k in range(0, 300, B):
            xb = np.zeros((B, 784), np.float32)
            xb[: min(B, 300 - k)] = x[k : k + B]
            probs.append(lib_s.infer(x=xb, y=np.zeros(B, np.int64))["probs"][: min(B, 300 - k)])
        self.assertEqual(correct, int((np.concatenate(probs).argmax(axis=1) == y).sum()))

    def test_callback_stops_and_raises(self):
        model = dlcc.compile(MLP, dims={"N": 64})
        x = np.zeros((128, 784), np.float32)
        y = np.zeros(128, np.int64)
        xp, yp = os.path.join(TMP.name, "sx.npy"), os.path.join(TMP.name, "sy.npy")
        np.save(xp, x)
        np.save(yp, y)
        s = model.session(threads=1)
        with dlcc.Loader.npy(xp, yp, batch_size=64, epochs=3) as l:
            r = s.train(l, "x", "y", epochs=3, callback=lambda ev: ev.kind == "step")
        self.assertEqual((r.steps, r.stopped), (1, True))

        def boom(ev):
            raise KeyError("from the callback")

        with dlcc.Loader.npy(xp, yp, batch_size=64, epochs=1) as l:
            with self.assertRaises(KeyError):
                s.train(l, "x", "y", callback=boom)
            with self.assertRaises(dlcc.ArgumentError):
                s.train(l, "nope", "y")
        with self.assertRaises(dlcc.ArgumentError):
            dlcc.lr_at("linear", 0.1, 0, 10)


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
    ok = ok and re.search(r"^epoch 1: loader wait [0-9.]+ ms/batch mean, [0-9.]+ ms max$",
                          p.stdout, re.M)
    m = re.search(r"^test accuracy: ([0-9.]+) \((\d+)/2000\)$", p.stdout, re.M)
    ok = ok and m and float(m.group(1)) > 0.6  # 16 steps of Adam on 2048 samples: ~0.75
    print("sample run:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--sample"]:
        sys.exit(run_sample())
    unittest.main(verbosity=2)
