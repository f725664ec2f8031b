#!/usr/bin/python3
"""The Python binding never lies and never crashes (tests/python/tests.cmake: python_robustness).

    test_robustness.py

Each test is a defect that was there: infer / train_step on inputs never given returned a loss of
0.0; reading an infer(copy=False) view after close() read freed memory (a segfault); integers
crossing ctypes were truncated to their low bits (threads=2**32+2 became 2) and wrong types raised
TypeError / AttributeError instead of dlcc.Error; a param Mapping lookup of an unknown name raised
instead of KeyError. Plus the rest of the audit: arrays of the wrong dtype / shape, non-contiguous
and Fortran-order arrays, corrupt checkpoints, closed sessions, models and loaders.

Finds the native parts as test_binding.py does ($DLCC_BUILD_DIR, $DLCC_LIBRARY, $DLRT_LIBRARY)
and compiles into a fresh temporary cache.
"""

import gc
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
import weakref

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
import dlcc  # noqa: E402

MLP = os.path.join(REPO, "samples", "mlp_fmnist.dlg")
TMP = tempfile.TemporaryDirectory(prefix="dlcc-pyrobust-")
os.environ["DLCC_CACHE_DIR"] = os.path.join(TMP.name, "cache")
N = 4


def batch(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, 784), dtype=np.float32)
    y = rng.integers(0, 10, N).astype(np.int64)
    return x, y


class Robustness(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = dlcc.compile(MLP, dims={"N": N})

    def session(self):
        return self.model.session(threads=1)

    # ---- inputs never given

    def test_infer_and_train_step_refuse_inputs_never_given(self):
        s = self.session()
        with self.assertRaises(dlcc.ArgumentError) as cm:
            s.infer()
        self.assertIn("input 'x'", str(cm.exception))
        self.assertIn("never set", str(cm.exception))
        with self.assertRaises(dlcc.ArgumentError) as cm:
            s.train_step()
        self.assertIn("never set", str(cm.exception))
        self.assertEqual(s.get_hparam("step"), 0.0)  # nothing ran
        x, y = batch(1)
        with self.assertRaises(dlcc.Error) as cm:
            s.train_step(x=x)  # the loss needs the labels too
        self.assertIn("input 'y'", str(cm.exception))
        info = s.train_step(x=x, y=y)
        self.assertGreater(info.loss, 0.5)  # a real cross-entropy over 10 classes, not 0.0
        self.assertEqual(info.step, 1)
        # Given once, an input stays given (bound arrays are read again by later steps).
        self.assertEqual(s.train_step().step, 2)
        # Every session tracks its own inputs.
        with self.assertRaises(dlcc.ArgumentError):
            self.session().infer()

    # ---- output views and close()

    def test_view_read_after_close_in_a_child(self):
        # Before the fix this read freed memory: run it in a child so a crash is a failure here.
        code = textwrap.dedent(f"""
            import gc, sys
            import numpy as np
            sys.path.insert(0, {os.path.join(REPO, "python")!r})
            import dlcc
            m = dlcc.compile({MLP!r}, dims={{"N": {N}}})
            s = m.session(threads=1)
            x = np.ones(({N}, 784), np.float32)
            y = np.zeros({N}, np.int64)
            want = s.infer(x=x, y=y)["probs"]
            view = s.infer(copy=False, x=x, y=y)["probs"]
            s.close()
            del s, m
            gc.collect()
            junk = [np.full((1 << 16,), 7.0) for _ in range(64)]  # reuse freed memory, if any
            assert np.array_equal(view, want), "the view changed"
            print("view ok", float(view.sum()))
        """)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("view ok", p.stdout)

    def test_views_keep_the_native_session_until_they_go(self):
        x, y = batch(2)
        s = self.session()
        want = s.infer(x=x, y=y)
        view = s.infer(copy=False, x=x, y=y)
        handle = weakref.ref(s._handle)
        s.close()
        self.assertTrue(s.closed)
        gc.collect()
        self.assertIsNotNone(handle())  # the views hold it
        np.testing.assert_array_equal(view["probs"], want["probs"])
        np.testing.assert_array_equal(view["loss"], want["loss"])
        del view
        gc.collect()
        self.assertIsNone(handle())  # destroyed with the last view
        # Without views, close() destroys at once.
        s2 = self.session()
        h2 = weakref.ref(s2._handle)
        s2.close()
        self.assertIsNone(h2())
        s2.close()  # idempotent

    def test_closed_session_raises_everywhere(self):
        x, y = batch(3)
        s = self.session()
        s.infer(x=x, y=y)
        s.close()
        ckpt = os.path.join(TMP.name, "closed.safetensors")
        calls = [
            lambda: s.infer(x=x, y=y),
            lambda: s.infer(),
            lambda: s.train_step(x=x, y=y),
            lambda: s.set_input("x", x),
            lambda: s.set_input("x", x, copy=True),
            lambda: s.output("probs"),
            lambda: s.get_param("w1"),
            lambda: s.params["w1"],
            lambda: s.set_param("w1", np.zeros((784, 256), np.float32)),
            lambda: s.save(ckpt),
            lambda: s.load(ckpt),
            lambda: s.threads,
        ]
        for i, call in enumerate(calls):
            with self.assertRaises(dlcc.ArgumentError, msg=f"call {i}") as cm:
                call()
            self.assertIn("closed", str(cm.exception))
        self.assertFalse(os.path.exists(ckpt))

    def test_closed_model(self):
        m = dlcc.compile(MLP, dims={"N": N})
        s = m.session(threads=1)
        m.close()
        with self.assertRaises(dlcc.ArgumentError) as cm:
            m.session()
        self.assertIn("closed", str(cm.exception))
        x, y = batch(4)
        self.assertGreater(s.infer(x=x, y=y)["loss"], 0)  # a session keeps its own reference

    # ---- integers and types crossing ctypes

    def test_threads_range_and_type(self):
        for bad in (2**32 + 2, 2**64 + 1, -1, 257, -(2**31)):
            with self.assertRaises(dlcc.ArgumentError, msg=bad) as cm:
                self.model.session(threads=bad)
            self.assertIn("out of range [0, 256]", str(cm.exception))
            self.assertIsInstance(cm.exception, ValueError)
        for bad in (2.0, True, "2", None, [2]):
            with self.assertRaises(dlcc.ArgumentTypeError, msg=repr(bad)) as cm:
                self.model.session(threads=bad)
            self.assertIsInstance(cm.exception, TypeError)
            self.assertIsInstance(cm.exception, dlcc.Error)
        self.assertEqual(self.model.session(threads=np.int64(2)).threads, 2)
        self.assertEqual(self.model.session(threads=256).threads, 256)

    def test_compile_dims_and_opt_level(self):
        # ctypes kept the low bits: dims={"N": 2**64 + 4} compiled with N = 4.
        with self.assertRaises(dlcc.ArgumentError) as cm:
            dlcc.compile(MLP, dims={"N": 2**64 + 4})
        self.assertIn("dims['N']: 18446744073709551620 is out of range", str(cm.exception))
        for bad in ("eight", 4.0, True, None):
            with self.assertRaises(dlcc.ArgumentTypeError, msg=repr(bad)) as cm:
                dlcc.compile(MLP, dims={"N": bad})
            self.assertIn("dims: every value must be an integer", str(cm.exception))
        with self.assertRaises(dlcc.Error) as cm:
            dlcc.compile(MLP, dims={"N": -4})  # the compiler's own check
        self.assertIn("at least 1", str(cm.exception))
        for bad in (2**32 + 3, -1, 4):
            with self.assertRaises(dlcc.ArgumentError, msg=bad):
                dlcc.compile(MLP, dims={"N": N}, opt_level=bad)
        with self.assertRaises(dlcc.ArgumentTypeError):
            dlcc.compile(MLP, dims={"N": N}, opt_level=2.0)
        self.assertEqual(dlcc.compile(MLP, dims={"N": np.int64(N)}, opt_level=3).inputs[0].shape,
                         (N, 784))

    def test_wrong_types_raise_dlcc_errors(self):
        s = self.session()
        x, y = batch(5)
        type_errors = [
            lambda: s.set_input(123, x),
            lambda: s.set_input(None, x),
            lambda: s.get_param(None),
            lambda: s.set_param(b"w1", x),
            lambda: s.output(3),
            lambda: s.save(None),
            lambda: s.load(3.5),
            lambda: dlcc.load(None),
            lambda: dlcc.Loader.npy(None),
            lambda: dlcc.Loader.idx(os.path.join(TMP.name, "a"), 7),
            lambda: dlcc.Session("model.so"),
            lambda: s.set_hparam(5, 1.0),
            lambda: s.set_hparam("lr", "x"),
            lambda: s.set_hparam("lr", None),
            lambda: s.get_hparam(None),
        ]
        for i, call in enumerate(type_errors):
            with self.assertRaises(dlcc.ArgumentTypeError, msg=f"call {i}"):
                call()
        value_errors = [
            lambda: s.set_input("x", [[1.0, 2.0], [3.0]]),  # ragged
            lambda: s.set_input("x", object()),
            lambda: s.set_input("x\0y", x),
            lambda: s.save(""),
            lambda: s.save("a\0b"),
            lambda: s.set_hparam("lr\0x", 0.1),
        ]
        for i, call in enumerate(value_errors):
            with self.assertRaises(dlcc.ArgumentError, msg=f"call {i}"):
                call()

    def test_params_mapping_semantics(self):
        s = self.session()
        p = s.params
        self.assertIn("w1", p)
        self.assertNotIn("nope", p)
        self.assertNotIn(5, p)
        self.assertIsNone(p.get("nope"))
        with self.assertRaises(KeyError):
            p["nope"]
        self.assertEqual(p["w1"].shape, (784, 256))
        self.assertEqual(p["w1.exp_avg"].shape, (784, 256))  # optimizer state by name too

    # ---- arrays

    def test_input_arrays(self):
        s = self.session()
        x, y = batch(6)
        with self.assertRaises(dlcc.ArgumentError) as cm:
            s.infer(x=x.astype(np.float64), y=y)
        self.assertIn("dtype float64 given, float32 expected", str(cm.exception))
        with self.assertRaises(dlcc.ArgumentError):
            s.infer(x=x, y=y.astype(np.int32))
        with self.assertRaises(dlcc.ArgumentError) as cm:
            s.infer(x=x.reshape(N, 28, 28), y=y)
        self.assertIn("shape [4, 28, 28] given", str(cm.exception))
        with self.assertRaises(dlcc.ArgumentError):
            s.set_param("w1", np.zeros((784, 256), np.float16))
        want = s.infer(x=x, y=y)
        # Non-contiguous, Fortran-order and read-only arrays of the right dtype and shape are
        # accepted and give the same results.
        wide = np.zeros((N, 2 * 784), np.float32)
        wide[:, ::2] = x
        fortran = np.asfortranarray(x)
        ro = x.copy()
        ro.flags.writeable = False
        for variant in (wide[:, ::2], fortran, ro):
            got = s.infer(x=variant, y=y)
            np.testing.assert_array_equal(got["probs"], want["probs"])
        with self.assertRaises(dlcc.ArgumentError):
            s.infer(x=x.tolist(), y=y)  # a list becomes float64: nothing is converted

    # ---- checkpoints

    def test_corrupt_checkpoints_leave_the_session_unchanged(self):
        x, y = batch(7)
        s = self.session()
        s.train_step(x=x, y=y)
        good = os.path.join(TMP.name, "good.safetensors")
        s.save(good)
        before = {k: s.get_param(k) for k in s.params}
        with open(good, "rb") as f:
            raw = f.read()
        hlen = int.from_bytes(raw[:8], "little")
        cases = {
            "garbage": b"not a safetensors file at all",
            "empty": b"",
            "truncated": raw[: len(raw) // 2],
            "huge header": (2**62).to_bytes(8, "little") + raw[8:],
            "bad json": raw[:8] + b"{" * hlen + raw[8 + hlen:],
        }
        for name, data in cases.items():
            path = os.path.join(TMP.name, f"bad-{name.replace(' ', '_')}.safetensors")
            with open(path, "wb") as f:
                f.write(data)
            with self.assertRaises(dlcc.Error, msg=name):
                s.load(path)
            for k, v in before.items():
                np.testing.assert_array_equal(s.get_param(k), v, err_msg=name)
        # A checkpoint of another model (other shapes) is refused too.
        other = dlcc.compile(os.path.join(REPO, "samples", "cnn_fmnist.dlg"))
        oc = os.path.join(TMP.name, "other.safetensors")
        other.session(threads=1).save(oc)
        with self.assertRaises(dlcc.Error):
            s.load(oc)
        s.load(good)  # and the good one still loads
        self.assertEqual(s.get_hparam("step"), 1.0)

    # ---- the loader

    def test_loader_misuse(self):
        rng = np.random.default_rng(8)
        xp, yp = os.path.join(TMP.name, "lx.npy"), os.path.join(TMP.name, "ly.npy")
        np.save(xp, rng.standard_normal((20, 6)).astype(np.float32))
        np.save(yp, rng.integers(0, 3, 20).astype(np.int64))
        with self.assertRaises(dlcc.Error):
            dlcc.Loader.npy(os.path.join(TMP.name, "missing.npy"))
        for bad in ({"batch_size": 2**64}, {"seed": -1}, {"producers": 2**31}):
            with self.assertRaises(dlcc.ArgumentError, msg=bad):
                dlcc.Loader.npy(xp, yp, **bad)
        with self.assertRaises(dlcc.ArgumentTypeError):
            dlcc.Loader.npy(xp, yp, batch_size=4.0)
        with self.assertRaises(dlcc.ArgumentError):
            dlcc.Loader.npy(xp, yp, last=["pad"])
        loader = dlcc.Loader.npy(xp, yp, batch_size=4)
        with self.assertRaises(dlcc.ArgumentError):
            loader.sample_index(2**70, 0)
        with self.assertRaises(dlcc.ArgumentTypeError):
            loader.sample_index(0, 1.5)
        with self.assertRaises(dlcc.ArgumentError):
            loader.sample_index(0, 20)  # the runtime's range check
        b = loader.next()
        b.release()
        b.release()  # idempotent
        with self.assertRaises(dlcc.ArgumentError):
            b.x
        loader.close()
        with self.assertRaises(dlcc.ArgumentError):
            loader.next()
        with self.assertRaises(dlcc.ArgumentError):
            loader.stats


class SampleDivergence(unittest.TestCase):
    FMNIST = "/usr/share/datasets/fashion-mnist"

    @unittest.skipUnless(os.path.isdir(FMNIST), "Debian's dataset-fashion-mnist is missing")
    def test_sample_stops_a_diverging_run(self):
        # samples/train_fmnist.py on a model whose loss is NaN at every step (Log of a MatMul
        # that goes negative): a warning at step 1, exit 4 after --max-skipped-steps, no
        # checkpoint. Before, it trained on and saved.
        model = os.path.join(TMP.name, "lognan784.dlg")
        with open(model, "w") as f:
            f.write(textwrap.dedent("""\
                model lognan
                dim N = 64
                input x : float[N, 784]
                input y : int64[N]
                param w : float[784, 10] = glorot_uniform(seed = 1)
                h = MatMul (x, w)
                l = Log (h)
                loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (l, y)
                output l
                train loss {
                  optimizer = sgd <lr = 0.1>
                }
            """))
        ckpt = os.path.join(TMP.name, "diverged.safetensors")
        cmd = [sys.executable, os.path.join(REPO, "samples", "train_fmnist.py"), "--model", model,
               "--batch", "64", "--limit-train", "1024", "--threads", "1",
               "--max-skipped-steps", "3", "--save", ckpt]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        self.assertIn("train_fmnist: warning: step 1 (epoch 1, batch 1) is non-finite (loss nan",
                      p.stderr)
        self.assertIn("training diverged at step 3 (epoch 1, batch 3): 3 non-finite steps "
                      "without 3 finite ones in a row between them", p.stderr)
        self.assertFalse(os.path.exists(ckpt))


if __name__ == "__main__":
    unittest.main(verbosity=2)
