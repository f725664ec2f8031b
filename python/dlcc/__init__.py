"""dlcc — Python binding of the dlcc compiler and its runtime (libdlrt), over ctypes and NumPy.

    import dlcc
    m = dlcc.compile("samples/mlp_fmnist.dlg", dims={"N": 64})  # through the compilation cache
    s = m.session(threads=2)
    info = s.train_step(x=x, y=y)      # StepInfo(loss, skipped, grad_norm, loss_scale, step)
    out = s.infer(x=x, y=y)            # {"probs": ndarray, "loss": ndarray}
    w1 = s.params["w1"]                # a copy; s.set_param("w1", w1) writes it back
    s.save("ckpt.safetensors"); s.load("ckpt.safetensors")

Where the native parts come from: $DLCC_BUILD_DIR (default: <repo>/build, the repository
holding this package) must hold the `dlcc` executable and `libdlrt.so`. $DLCC_EXE and
$DLRT_LIBRARY override each path separately.

Compiling: dlcc.compile runs `dlcc compile MODEL -D NAME=V ... -o TMP.so` (through the cache;
$DLCC_CACHE_DIR or the cache_dir argument selects it), loads the artifact with
dlrt_model_load_file and removes the temporary file. A failing compile raises dlcc.Error with
dlcc's diagnostics (its stderr).

Data movement:
  * inputs: a C-contiguous array of the input's exact dtype and shape is passed by pointer to
    dlrt_session_set_input, which copies it once into the session's arena (the runtime has no
    zero-copy bind). A non-contiguous array is first made contiguous (one extra copy). A wrong
    dtype or shape raises dlcc.Error; nothing is converted silently.
  * outputs: infer() returns COPIES by default (safe to keep). infer(copy=False) returns
    read-only NumPy VIEWS of the session's output buffers, valid only until the next
    infer/train_step/load on that session or its destruction.
  * params: s.params[name] returns a copy; s.set_param(name, array) writes one (same rules as
    inputs).
Errors of the runtime raise dlcc.Error carrying dlrt_last_error()'s message.
"""

import collections
import collections.abc
import ctypes
import os
import subprocess
import tempfile

import numpy as np

__all__ = ["Error", "Model", "Session", "StepInfo", "TensorDesc", "compile", "load"]


class Error(Exception):
    """Any failure of the compiler or runtime; str() is the C message."""


_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))


def _build_dir():
    return os.environ.get("DLCC_BUILD_DIR") or os.path.join(_REPO, "build")


def _dlcc_exe():
    return os.environ.get("DLCC_EXE") or os.path.join(_build_dir(), "dlcc")


# ------------------------------------------------------------------------------------------
# ctypes declarations of runtime/dlrt.h

_MAX_DIMS = 8
_OK = 0


class _TensorDesc(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int32),
        ("dims", ctypes.c_int64 * _MAX_DIMS),
        ("nbytes", ctypes.c_size_t),
    ]


class _StepInfo(ctypes.Structure):
    _fields_ = [
        ("loss", ctypes.c_double),
        ("skipped", ctypes.c_int),
        ("grad_norm", ctypes.c_double),
        ("loss_scale", ctypes.c_double),
        ("step", ctypes.c_int64),
    ]


class _SessionOptions(ctypes.Structure):
    _fields_ = [
        ("threads", ctypes.c_int),
        ("profile_path", ctypes.c_char_p),
        ("source_name", ctypes.c_char_p),
    ]


# dlrt_dtype -> NumPy dtype. bfloat16 has no NumPy type: it travels as uint16 bit patterns.
_DTYPES = {
    0: np.dtype(np.float32),
    1: np.dtype(np.float16),
    2: np.dtype(np.uint16),
    3: np.dtype(np.int32),
    4: np.dtype(np.int64),
    5: np.dtype(np.bool_),
}
_DTYPE_NAMES = {0: "float32", 1: "float16", 2: "bfloat16", 3: "int32", 4: "int64", 5: "bool"}

_lib = None


def _load_lib():
    global _lib
    if _lib is not None:
        return _lib
    path = os.environ.get("DLRT_LIBRARY") or os.path.join(_build_dir(), "libdlrt.so")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise Error(f"cannot load libdlrt from {path} (set DLCC_BUILD_DIR): {e}") from None
    P = ctypes.c_void_p
    S = ctypes.c_int
    sz = ctypes.c_size_t
    cs = ctypes.c_char_p
    PD = ctypes.POINTER(_TensorDesc)
    sigs = {
        "dlrt_version": (cs, []),
        "dlrt_status_str": (cs, [S]),
        "dlrt_last_error": (cs, []),
        "dlrt_model_load_file": (S, [cs, ctypes.POINTER(P)]),
        "dlrt_model_load_memory": (S, [P, sz, ctypes.POINTER(P)]),
        "dlrt_model_release": (None, [P]),
        "dlrt_model_name": (cs, [P]),
        "dlrt_model_target": (cs, [P]),
        "dlrt_model_num_inputs": (sz, [P]),
        "dlrt_model_num_outputs": (sz, [P]),
        "dlrt_model_num_params": (sz, [P]),
        "dlrt_model_num_state": (sz, [P]),
        "dlrt_model_input": (S, [P, sz, PD]),
        "dlrt_model_output": (S, [P, sz, PD]),
        "dlrt_model_param": (S, [P, sz, PD]),
        "dlrt_model_state": (S, [P, sz, PD]),
        "dlrt_model_has_train_step": (S, [P]),
        "dlrt_model_num_hparams": (sz, [P]),
        "dlrt_model_hparam_name": (cs, [P, sz]),
        "dlrt_session_options_init": (None, [ctypes.POINTER(_SessionOptions)]),
        "dlrt_session_create_ex": (S, [P, ctypes.POINTER(_SessionOptions), ctypes.POINTER(P)]),
        "dlrt_session_destroy": (None, [P]),
        "dlrt_session_threads": (S, [P]),
        "dlrt_session_set_input": (S, [P, cs, P, sz]),
        "dlrt_session_infer": (S, [P]),
        "dlrt_session_output": (S, [P, cs, ctypes.POINTER(P), PD]),
        "dlrt_session_get_param": (S, [P, cs, P, sz]),
        "dlrt_session_set_param": (S, [P, cs, P, sz]),
        "dlrt_session_get_hparam": (S, [P, cs, ctypes.POINTER(ctypes.c_double)]),
        "dlrt_session_set_hparam": (S, [P, cs, ctypes.c_double]),
        "dlrt_session_train_step": (S, [P, ctypes.POINTER(_StepInfo)]),
        "dlrt_session_save": (S, [P, cs]),
        "dlrt_session_load": (S, [P, cs]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    _lib = lib
    return lib


def _check(status, what):
    if status != _OK:
        lib = _load_lib()
        msg = lib.dlrt_last_error().decode("utf-8", "replace")
        if not msg:
            msg = lib.dlrt_status_str(status).decode()
        raise Error(f"{what}: {msg}")


def version():
    """libdlrt's version string."""
    return _load_lib().dlrt_version().decode()


# ------------------------------------------------------------------------------------------
# Model

TensorDesc = collections.namedtuple("TensorDesc", "name dtype dtype_name shape nbytes")
StepInfo = collections.namedtuple("StepInfo", "loss skipped grad_norm loss_scale step")


def _desc(d):
    return TensorDesc(
        d.name.decode(),
        _DTYPES[d.dtype],
        _DTYPE_NAMES[d.dtype],
        tuple(int(d.dims[i]) for i in range(d.rank)),
        int(d.nbytes),
    )


def _as_buffer(desc, value, what):
    """`value` as a C-contiguous ndarray of exactly desc's dtype and shape (no copy when it
    already is one; a copy when it is non-contiguous). Raises Error on a mismatch."""
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    if a.dtype != desc.dtype:
        raise Error(
            f"{what} '{desc.name}': dtype {a.dtype} given, {desc.dtype_name} expected"
        )
    if a.shape != desc.shape:
        raise Error(
            f"{what} '{desc.name}': shape {list(a.shape)} given, {list(desc.shape)} expected"
        )
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


class Model:
    """A loaded artifact (immutable; shared by its sessions)."""

    def __init__(self, handle):
        self._lib = _load_lib()
        self._h = handle
        lib = self._lib

        def descs(count, get):
            out = []
            for i in range(count(handle)):
                d = _TensorDesc()
                _check(get(handle, i, ctypes.byref(d)), "describing the model")
                out.append(_desc(d))
            return out

        self.name = lib.dlrt_model_name(handle).decode()
        self.target = lib.dlrt_model_target(handle).decode()
        self.inputs = descs(lib.dlrt_model_num_inputs, lib.dlrt_model_input)
        self.outputs = descs(lib.dlrt_model_num_outputs, lib.dlrt_model_output)
        self.params = descs(lib.dlrt_model_num_params, lib.dlrt_model_param)
        self.state = descs(lib.dlrt_model_num_state, lib.dlrt_model_state)
        self.has_train_step = bool(lib.dlrt_model_has_train_step(handle))
        self.hparams = [
            lib.dlrt_model_hparam_name(handle, i).decode()
            for i in range(lib.dlrt_model_num_hparams(handle))
        ]

    @classmethod
    def load_file(cls, path):
        """Loads an artifact (.so written by `dlcc compile`)."""
        lib = _load_lib()
        h = ctypes.c_void_p()
        _check(lib.dlrt_model_load_file(os.fsencode(path), ctypes.byref(h)), f"loading {path}")
        return cls(h)

    def session(self, threads=0):
        """A new session (params initialised from the artifact). threads: 0 = $DLRT_THREADS,
        else the number of cores."""
        return Session(self, threads)

    def close(self):
        if self._h:
            self._lib.dlrt_model_release(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return f"<dlcc.Model {self.name} inputs={[d.name for d in self.inputs]}>"


def load(path):
    """Loads a compiled artifact file."""
    return Model.load_file(path)


def compile(path, dims=None, cache_dir=None, opt_level=None):
    """Compiles a .dlg model (through the compilation cache) and loads it. dims: {"N": 64}
    binds dims; cache_dir: the cache directory (default $DLCC_CACHE_DIR, else the user's)."""
    exe = _dlcc_exe()
    with tempfile.TemporaryDirectory(prefix="dlcc-py-") as tmp:
        out = os.path.join(tmp, "model.so")
        cmd = [exe, "compile", os.fspath(path), "-o", out]
        for k, v in (dims or {}).items():
            cmd += ["-D", f"{k}={int(v)}"]
        if cache_dir is not None:
            cmd += ["--cache-dir", os.fspath(cache_dir)]
        if opt_level is not None:
            cmd += ["-O", str(int(opt_level))]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            raise Error(f"cannot run {exe} (set DLCC_BUILD_DIR): {e}") from None
        if p.returncode != 0:
            msg = p.stderr.strip() or p.stdout.strip() or f"dlcc exited with {p.returncode}"
            raise Error(msg)
        return Model.load_file(out)


# ------------------------------------------------------------------------------------------
# Session


class _Params(collections.abc.Mapping):
    """name -> NumPy copy of a param (or an optimizer state tensor "PARAM.SLOT")."""

    def __init__(self, session):
        self._s = session

    def __getitem__(self, name):
        return self._s.get_param(name)

    def __iter__(self):
        return iter([d.name for d in self._s.model.params])

    def __len__(self):
        return len(self._s.model.params)

    def __setitem__(self, name, value):
        self._s.set_param(name, value)


class Session:
    """Per-run state of a model. Use from one thread at a time."""

    def __init__(self, model, threads=0):
        self.model = model
        self._lib = model._lib
        opts = _SessionOptions()
        self._lib.dlrt_session_options_init(ctypes.byref(opts))
        opts.threads = int(threads)
        h = ctypes.c_void_p()
        _check(
            self._lib.dlrt_session_create_ex(model._h, ctypes.byref(opts), ctypes.byref(h)),
            "creating a session",
        )
        self._h = h
        self._in = {d.name: d for d in model.inputs}
        self._out = {d.name: d for d in model.outputs}
        self._par = {d.name: d for d in model.params + model.state}

    @property
    def threads(self):
        return int(self._lib.dlrt_session_threads(self._h))

    def close(self):
        if self._h:
            self._lib.dlrt_session_destroy(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _live(self):
        if not self._h:
            raise Error("the session is closed")
        return self._h

    def set_input(self, name, value):
        h = self._live()
        d = self._in.get(name)
        if d is None:
            raise Error(f"unknown input '{name}' (inputs: {', '.join(self._in)})")
        a = _as_buffer(d, value, "input")
        _check(
            self._lib.dlrt_session_set_input(
                h, name.encode(), a.ctypes.data_as(ctypes.c_void_p), a.nbytes
            ),
            f"setting input '{name}'",
        )

    def _set_inputs(self, inputs):
        for name, value in inputs.items():
            self.set_input(name, value)

    def output(self, name, copy=True):
        """Output `name` of the last step: a copy, or with copy=False a read-only view of the
        session's buffer (valid until the next step on this session)."""
        h = self._live()
        d = self._out.get(name)
        if d is None:
            raise Error(f"unknown output '{name}' (outputs: {', '.join(self._out)})")
        ptr = ctypes.c_void_p()
        _check(
            self._lib.dlrt_session_output(h, name.encode(), ctypes.byref(ptr), None),
            f"reading output '{name}'",
        )
        buf = (ctypes.c_char * d.nbytes).from_address(ptr.value)
        a = np.frombuffer(buf, dtype=d.dtype).reshape(d.shape)
        if copy:
            return a.copy()
        a.flags.writeable = False
        return a

    def infer(self, copy=True, **inputs):
        """Sets the given inputs and runs the infer entry point; returns {output name: array}
        (copies; with copy=False read-only views valid until the next step)."""
        self._set_inputs(inputs)
        _check(self._lib.dlrt_session_infer(self._live()), "infer")
        return {name: self.output(name, copy=copy) for name in self._out}

    def train_step(self, **inputs):
        """Sets the given inputs and runs one train step; returns a StepInfo."""
        self._set_inputs(inputs)
        info = _StepInfo()
        _check(self._lib.dlrt_session_train_step(self._live(), ctypes.byref(info)), "train_step")
        return StepInfo(
            float(info.loss),
            bool(info.skipped),
            float(info.grad_norm),
            float(info.loss_scale),
            int(info.step),
        )

    @property
    def params(self):
        return _Params(self)

    def get_param(self, name):
        h = self._live()
        d = self._par.get(name)
        if d is None:
            raise Error(f"unknown param '{name}'")
        a = np.empty(d.shape, dtype=d.dtype)
        _check(
            self._lib.dlrt_session_get_param(
                h, name.encode(), a.ctypes.data_as(ctypes.c_void_p), a.nbytes
            ),
            f"reading param '{name}'",
        )
        return a

    def set_param(self, name, value):
        h = self._live()
        d = self._par.get(name)
        if d is None:
            raise Error(f"unknown param '{name}'")
        a = _as_buffer(d, value, "param")
        _check(
            self._lib.dlrt_session_set_param(
                h, name.encode(), a.ctypes.data_as(ctypes.c_void_p), a.nbytes
            ),
            f"writing param '{name}'",
        )

    def get_hparam(self, name):
        v = ctypes.c_double()
        _check(
            self._lib.dlrt_session_get_hparam(self._live(), name.encode(), ctypes.byref(v)),
            f"reading hparam '{name}'",
        )
        return v.value

    def set_hparam(self, name, value):
        _check(
            self._lib.dlrt_session_set_hparam(self._live(), name.encode(), float(value)),
            f"setting hparam '{name}'",
        )

    def save(self, path):
        """Writes a safetensors checkpoint (params, optimizer state, step) atomically."""
        _check(self._lib.dlrt_session_save(self._live(), os.fsencode(path)), f"saving {path}")

    def load(self, path):
        """Loads a safetensors checkpoint (or a subset of it)."""
        _check(self._lib.dlrt_session_load(self._live(), os.fsencode(path)), f"loading {path}")
