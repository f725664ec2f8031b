"""dlcc — Python binding of the dlcc compiler and its runtime (libdlrt), over ctypes and NumPy.

    import dlcc
    m = dlcc.compile("samples/mlp_fmnist.dlg", dims={"N": 64})  # through the compilation cache
    s = m.session(threads=2)
    info = s.train_step(x=x, y=y)      # StepInfo(loss, skipped, grad_norm, loss_scale, step)
    out = s.infer(x=x, y=y)            # {"probs": ndarray, "loss": ndarray}
    w1 = s.params["w1"]                # a copy; s.set_param("w1", w1) writes it back
    s.save("ckpt.safetensors"); s.load("ckpt.safetensors")

    with dlcc.Loader.npy("x.npy", "y.npy", batch_size=64, producers=2, seed=1) as loader:
        for b in loader:               # each batch released when the next one is taken
            s.train_step(x=b.x, y=b.y) # zero-copy: the step reads the loader's slot

Where the native parts come from: $DLCC_BUILD_DIR (default: <repo>/build, the repository
holding this package) must hold `libdlcc.so` (the compiler) and `libdlrt.so` (the runtime);
a package installed by `cmake --install BUILD --prefix P` loads them from P/lib with no
environment at all, and one installed by `pip install ./python` from the directory recorded at
install time ($DLCC_PREFIX/lib, else the repository's build/; python/setup.py).
$DLCC_LIBRARY and $DLRT_LIBRARY override each path separately.

Compiling: dlcc.compile calls libdlcc's dlcc_lib_compile in this process (driver/libdlcc.h):
the compilation cache is looked up first ($DLCC_CACHE_DIR or the cache_dir argument selects
it), so a model compiled before, by any process, is a lookup; the artifact's bytes are loaded
with dlrt_model_load_memory (nothing is written to disk but the cache entry). A failing compile
raises dlcc.Error carrying the compiler's diagnostics ("model.dlg:3:7: error: ...").

Data movement:
  * inputs are ZERO-COPY: Session.set_input(name, a), infer(**inputs) and train_step(**inputs)
    hand a C-contiguous NumPy array of the input's exact dtype and shape, aligned to its element
    size, to dlrt_session_bind_input by pointer: the following steps read the caller's memory
    directly. The session keeps a reference to the bound array (so it cannot be freed while
    bound) until the input is bound again, set by copy or the session is closed. Consequently
    changing the array in place changes what the next step sees: s.infer() / s.train_step()
    with no arguments run on the arrays bound last. A non-contiguous or misaligned array is
    copied once into a contiguous array that the session keeps and binds (later changes to the
    original are then not seen). set_input(name, a, copy=True) copies into the session's own
    memory instead (dlrt_session_set_input) and drops the reference. A wrong dtype or shape
    raises dlcc.Error; nothing is converted silently. An array overlapping one of the session's
    output buffers (an infer(copy=False) view) is refused: steps write those buffers.
  * outputs: infer() returns COPIES by default (safe to keep). infer(copy=False) returns
    read-only NumPy VIEWS of the session's output buffers: the next step overwrites what they
    show, and each keeps the native session alive, so a view read after close() shows the last
    outputs, never freed memory (close() destroys the session once no view is left).
  * params: s.params[name] returns a copy; s.set_param(name, array) writes one (same dtype and
    shape rules as inputs; always copied).
  * data loader: dlcc.Loader runs libdlrt's loader (producer threads filling a ring of batch
    slots); a Batch's x / y are read-only views of a slot, bound to a session without a copy,
    valid until the batch is released (see Loader). A session keeps such a binding after the
    batch's release, so pass each new batch's arrays to the step that uses them.
Data parallelism: dlcc.Comm(mpi_comm) opens libdlrt's communicator over MPI (an mpi4py
communicator, e.g. MPI.COMM_WORLD, or None: MPI's world, initialised by libdlrt if needed);
Session.bind_comm(comm) makes every train_step all-reduce the gradients across the ranks (run
the script under `mpirun -np N python3 ...`). See docs/python.md and docs/runtime.md.
Errors of the runtime raise dlcc.Error carrying dlrt_last_error()'s message; misuse raises its
subclasses ArgumentError (also a ValueError: out-of-range integers, wrong dtype or shape, unknown
names, closed objects, inputs never given) and ArgumentTypeError (also a TypeError). Every
integer is range-checked before it reaches ctypes. More in docs/python.md.
"""

import collections
import collections.abc
import ctypes
import numbers
import os
import tempfile
import weakref

import numpy as np

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "ArrayInfo",
    "Batch",
    "Comm",
    "Error",
    "Loader",
    "LoaderInfo",
    "LoaderStats",
    "Model",
    "Session",
    "StepInfo",
    "TensorDesc",
    "TrainEvent",
    "TrainResult",
    "compile",
    "load",
    "lr_at",
]


class Error(Exception):
    """Any failure of the compiler or runtime, and every misuse of the binding; str() is the
    message. Misuse raises one of the two subclasses below, so `except dlcc.Error` catches
    everything and `except ValueError` / `except TypeError` work as for any Python API."""


class ArgumentError(Error, ValueError):
    """A bad argument value: an integer out of its C range, an array of the wrong dtype or shape,
    an unknown name, a closed session / loader / model, or a call the runtime refuses as an
    invalid argument (DLRT_ERR_INVALID_ARG: e.g. infer before an input was given)."""


class ArgumentTypeError(Error, TypeError):
    """An argument of the wrong type (a float or bool where an integer is needed, a non-string
    name, a non-path file name)."""


def _integer(what, value, lo, hi):
    """`value` as a Python int in [lo, hi] (the range of the C field it goes to: ctypes would
    silently keep only the low bits). bool is refused, as is anything that is not an integer."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentTypeError(f"{what}: an integer expected, {type(value).__name__} given")
    v = int(value)
    if not lo <= v <= hi:
        raise ArgumentError(f"{what}: {v} is out of range [{lo}, {hi}]")
    return v


def _name_arg(what, name):
    """A tensor name (str) as the bytes the C API takes."""
    if not isinstance(name, str):
        raise ArgumentTypeError(f"{what}: a name (str) expected, {type(name).__name__} given")
    if "\0" in name:
        raise ArgumentError(f"{what}: {name!r} contains a NUL character")
    return name.encode()


def _path_arg(what, path):
    """A file name (str, bytes or os.PathLike) as the bytes the C API takes."""
    try:
        b = os.fsencode(path)
    except TypeError:
        raise ArgumentTypeError(
            f"{what}: a file name (str, bytes or os.PathLike) expected, "
            f"{type(path).__name__} given"
        ) from None
    if b"\0" in b:
        raise ArgumentError(f"{what}: {path!r} contains a NUL character")
    if not b:
        raise ArgumentError(f"{what}: the file name is empty")
    return b


_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))


def _build_dir():
    return os.environ.get("DLCC_BUILD_DIR") or os.path.join(_REPO, "build")


# Installed by `cmake --install` into PREFIX/LIBDIR/python3/dist-packages/dlcc: the libraries are
# in PREFIX/LIBDIR, three levels up.
_INSTALLED_LIBDIR = os.path.normpath(os.path.join(_HERE, os.pardir, os.pardir, os.pardir))


def _pip_libdir():
    """The library directory `pip install ./python` recorded (python/setup.py), else None."""
    try:
        from . import _libdir  # written into the built package only, never in the source tree
    except ImportError:
        return None
    return _libdir.LIBDIR


def _open_library(env, filename):
    """ctypes.CDLL of $env, else of filename in the build directory ($DLCC_BUILD_DIR, or the
    repository's build/ when this package is the source tree's), else in the directory that
    `pip install` recorded, else beside a package installed by `cmake --install`."""
    path = os.environ.get(env)
    if not path:
        in_tree = os.path.isfile(os.path.join(_REPO, "CMakeLists.txt"))
        if os.environ.get("DLCC_BUILD_DIR") or in_tree:
            path = os.path.join(_build_dir(), filename)
        else:
            path = os.path.join(_pip_libdir() or _INSTALLED_LIBDIR, filename)
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise Error(
            f"cannot load {filename} from {path} (set DLCC_BUILD_DIR or {env}): {e}"
        ) from None


_cc = None


def _load_compiler():
    """libdlcc.so, the compiler's flat C API (driver/libdlcc.h), loaded once."""
    global _cc
    if _cc is not None:
        return _cc
    cc = _open_library("DLCC_LIBRARY", "libdlcc.so")
    cc.dlcc_lib_compile.restype = ctypes.c_int
    cc.dlcc_lib_compile.argtypes = [
        ctypes.c_char_p,  # path
        ctypes.POINTER(ctypes.c_char_p),  # dim names
        ctypes.POINTER(ctypes.c_int64),  # dim values
        ctypes.c_size_t,  # n_dims
        ctypes.c_char_p,  # cache_dir
        ctypes.c_int,  # use_cache
        ctypes.c_int,  # opt_level
        ctypes.POINTER(ctypes.c_void_p),  # artifact
        ctypes.POINTER(ctypes.c_size_t),  # artifact_len
        ctypes.POINTER(ctypes.c_int),  # cache_hit
        ctypes.POINTER(ctypes.c_void_p),  # messages
    ]
    cc.dlcc_lib_free.restype = None
    cc.dlcc_lib_free.argtypes = [ctypes.c_void_p]
    cc.dlcc_lib_version.restype = ctypes.c_char_p
    cc.dlcc_lib_version.argtypes = []
    _cc = cc
    return cc


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
        ("device", ctypes.c_int),  # dlrt_device_kind
    ]


class _StepInfo(ctypes.Structure):
    _fields_ = [
        ("loss", ctypes.c_double),
        ("skipped", ctypes.c_int),
        ("grad_norm", ctypes.c_double),
        ("loss_scale", ctypes.c_double),
        ("step", ctypes.c_int64),
    ]


class _CommOptions(ctypes.Structure):
    _fields_ = [
        ("timeout_s", ctypes.c_double),
        ("plugin_path", ctypes.c_char_p),
    ]


class _SessionOptions(ctypes.Structure):
    _fields_ = [
        ("threads", ctypes.c_int),
        ("profile_path", ctypes.c_char_p),
        ("source_name", ctypes.c_char_p),
        ("flush_denormals", ctypes.c_int),
    ]


_LOADER_MAX_CHANNELS = 16


# Mirrors of the training loop's structs (runtime/dlrt.h, "Training loop").
class _Guard(ctypes.Structure):
    _fields_ = [
        ("max", ctypes.c_int64),
        ("scale", ctypes.c_double),
        ("run", ctypes.c_int64),
        ("good", ctypes.c_int64),
        ("run_start", ctypes.c_int64),
        ("total", ctypes.c_int64),
        ("first", ctypes.c_int),
        ("stop", ctypes.c_int),
    ]


class _TrainEvent(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int),
        ("epoch", ctypes.c_int64),
        ("batch", ctypes.c_int64),
        ("step", ctypes.c_int64),
        ("steps_per_epoch", ctypes.c_int64),
        ("total_steps", ctypes.c_int64),
        ("batch_size", ctypes.c_int64),
        ("lr", ctypes.c_double),
        ("data", ctypes.c_void_p),
        ("info", _StepInfo),
        ("loss_scale_used", ctypes.c_double),
        ("nonfinite", ctypes.c_int),
        ("guard", ctypes.POINTER(_Guard)),
        ("loss_sum", ctypes.c_double),
        ("skipped", ctypes.c_int64),
        ("wait_ms", ctypes.c_double),
        ("epoch_s", ctypes.c_double),
        ("run_s", ctypes.c_double),
    ]


class _LoadRule(ctypes.Structure):
    _fields_ = [("from_", ctypes.c_char_p), ("to", ctypes.c_char_p)]


_LOAD_NOTICE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)


class _LoadOptions(ctypes.Structure):
    _fields_ = [
        ("rules", ctypes.POINTER(_LoadRule)),
        ("n_rules", ctypes.c_size_t),
        ("ignore_unknown", ctypes.c_int),
        ("notice", _LOAD_NOTICE),
        ("user", ctypes.c_void_p),
    ]


_TRAIN_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_TrainEvent))


class _TrainOptions(ctypes.Structure):
    _fields_ = [
        ("data_input", ctypes.c_char_p),
        ("label_input", ctypes.c_char_p),
        ("epochs", ctypes.c_int64),
        ("schedule", ctypes.c_int),
        ("lr", ctypes.c_double),
        ("warmup", ctypes.c_int64),
        ("max_skipped", ctypes.c_int64),
        ("callback", _TRAIN_CALLBACK),
        ("user", ctypes.c_void_p),
        ("start_step", ctypes.c_int64),
        ("start_loss_sum", ctypes.c_double),
        ("start_skipped", ctypes.c_int64),
        ("start_guard", ctypes.POINTER(_Guard)),
    ]


class _TrainResult(ctypes.Structure):
    _fields_ = [
        ("steps", ctypes.c_int64),
        ("nonfinite", ctypes.c_int64),
        ("diverged", ctypes.c_int),
        ("stopped", ctypes.c_int),
        ("base_lr", ctypes.c_double),
    ]


# Mirrors of the loader structs; the layout must match runtime/dlrt.h exactly (checked by
# tests/python/test_binding.py against the C sizes).
class _LoaderOptions(ctypes.Structure):
    _fields_ = [
        ("batch_size", ctypes.c_int64),
        ("producers", ctypes.c_int),
        ("slots", ctypes.c_int),
        ("seed", ctypes.c_uint64),
        ("shuffle", ctypes.c_int),
        ("last", ctypes.c_int),
        ("pad_label", ctypes.c_int64),
        ("epochs", ctypes.c_int64),
        ("scale", ctypes.c_float),
        ("norm", ctypes.c_int),
        ("n_norm", ctypes.c_int),
        ("mean", ctypes.c_float * _LOADER_MAX_CHANNELS),
        ("std", ctypes.c_float * _LOADER_MAX_CHANNELS),
        ("crop_pad", ctypes.c_int),
        ("hflip", ctypes.c_int),
        ("labels", ctypes.c_int),
        ("limit", ctypes.c_int64),
        ("n_classes", ctypes.c_int64),
        ("shard_count", ctypes.c_int64),
        ("shard_index", ctypes.c_int64),
        ("u8_to_unit", ctypes.c_int),
        ("start_batch", ctypes.c_int64),
    ]


class _LoaderBatch(ctypes.Structure):
    _fields_ = [
        ("x", ctypes.c_void_p),
        ("y", ctypes.c_void_p),
        ("y_i32", ctypes.c_void_p),
        ("n_valid", ctypes.c_int64),
        ("epoch", ctypes.c_int64),
        ("index", ctypes.c_int64),
        ("seq", ctypes.c_int64),
        ("wait_ms", ctypes.c_double),
        ("slot_", ctypes.c_int),
    ]


# dlrt_loader_array and dlrt_loader_array_info: the same head (input name, file, dtype and
# per-sample shape) and tail (the normalisation's values), different fields between.
_ARRAY_HEAD = [
    ("name", ctypes.c_char_p),
    ("path", ctypes.c_char_p),
    ("dtype", ctypes.c_int),
    ("sample_rank", ctypes.c_int32),
    ("sample_dims", ctypes.c_int64 * _MAX_DIMS),
]
_ARRAY_TAIL = [("mean", ctypes.POINTER(ctypes.c_float)), ("std", ctypes.POINTER(ctypes.c_float))]


class _LoaderArray(ctypes.Structure):
    _fields_ = _ARRAY_HEAD + [
        ("n_classes", ctypes.c_int64),
        ("norm", ctypes.c_int),
        ("per_channel", ctypes.c_int),
        ("n_norm", ctypes.c_int),
    ] + _ARRAY_TAIL


class _LoaderArrayInfo(ctypes.Structure):
    _fields_ = _ARRAY_HEAD + [
        ("sample_numel", ctypes.c_int64),
        ("batch_bytes", ctypes.c_size_t),
        ("norm", ctypes.c_int),
        ("n_channels", ctypes.c_int),
    ] + _ARRAY_TAIL


class _LoaderStats(ctypes.Structure):
    _fields_ = [
        ("batches", ctypes.c_int64),
        ("first_wait_ms", ctypes.c_double),
        ("mean_wait_ms", ctypes.c_double),
        ("max_wait_ms", ctypes.c_double),
    ]


class _LoaderInfo(ctypes.Structure):
    _fields_ = [
        ("n_samples", ctypes.c_int64),
        ("batches_per_epoch", ctypes.c_int64),
        ("sample_rank", ctypes.c_int32),
        ("sample_dims", ctypes.c_int64 * _MAX_DIMS),
        ("sample_numel", ctypes.c_int64),
        ("n_channels", ctypes.c_int),
        ("mean", ctypes.c_float * _LOADER_MAX_CHANNELS),
        ("std", ctypes.c_float * _LOADER_MAX_CHANNELS),
        ("epoch_samples", ctypes.c_int64),
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
    lib = _open_library("DLRT_LIBRARY", "libdlrt.so")
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
        "dlrt_model_device": (S, [P]),
        "dlrt_device_name": (cs, [S]),
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
        "dlrt_session_device": (S, [P]),
        "dlrt_session_set_input": (S, [P, cs, P, sz]),
        "dlrt_session_bind_input": (S, [P, cs, P, sz]),
        "dlrt_session_infer": (S, [P]),
        "dlrt_session_output": (S, [P, cs, ctypes.POINTER(P), PD]),
        "dlrt_session_output_copy": (S, [P, cs, P, sz]),
        "dlrt_session_input_copy": (S, [P, cs, P, sz]),
        "dlrt_session_get_param": (S, [P, cs, P, sz]),
        "dlrt_session_set_param": (S, [P, cs, P, sz]),
        "dlrt_session_get_hparam": (S, [P, cs, ctypes.POINTER(ctypes.c_double)]),
        "dlrt_session_set_hparam": (S, [P, cs, ctypes.c_double]),
        "dlrt_session_train_step": (S, [P, ctypes.POINTER(_StepInfo)]),
        "dlrt_session_save": (S, [P, cs]),
        "dlrt_session_load": (S, [P, cs]),
        "dlrt_session_load_with": (S, [P, cs, ctypes.POINTER(_LoadOptions)]),
        "dlrt_loader_options_init": (None, [ctypes.POINTER(_LoaderOptions)]),
        "dlrt_loader_create_idx": (S, [cs, cs, ctypes.POINTER(_LoaderOptions), ctypes.POINTER(P)]),
        "dlrt_loader_create_npy": (S, [cs, cs, ctypes.POINTER(_LoaderOptions), ctypes.POINTER(P)]),
        "dlrt_loader_array_init": (None, [ctypes.POINTER(_LoaderArray)]),
        "dlrt_loader_create_arrays": (
            S, [ctypes.POINTER(_LoaderArray), sz, ctypes.POINTER(_LoaderOptions), ctypes.POINTER(P)]
        ),
        "dlrt_loader_num_arrays": (sz, [P]),
        "dlrt_loader_array_info_get": (S, [P, sz, ctypes.POINTER(_LoaderArrayInfo)]),
        "dlrt_loader_batch_array": (
            S,
            [P, ctypes.POINTER(_LoaderBatch), sz, ctypes.POINTER(ctypes.c_void_p),
             ctypes.POINTER(sz)],
        ),
        "dlrt_loader_next": (S, [P, ctypes.POINTER(_LoaderBatch)]),
        "dlrt_loader_release": (S, [P, ctypes.POINTER(_LoaderBatch)]),
        "dlrt_loader_sample_index": (
            S,
            [P, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)],
        ),
        "dlrt_loader_stats_get": (None, [P, ctypes.POINTER(_LoaderStats)]),
        "dlrt_loader_info_get": (None, [P, ctypes.POINTER(_LoaderInfo)]),
        "dlrt_loader_destroy": (None, [P]),
        "dlrt_lr_schedule_at": (
            ctypes.c_double,
            [S, ctypes.c_double, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64],
        ),
        "dlrt_lr_schedule_parse": (S, [cs, ctypes.POINTER(S)]),
        "dlrt_train_options_init": (None, [ctypes.POINTER(_TrainOptions)]),
        "dlrt_train_run": (
            S, [P, P, ctypes.POINTER(_TrainOptions), ctypes.POINTER(_TrainResult)]
        ),
        "dlrt_comm_options_init": (None, [ctypes.POINTER(_CommOptions)]),
        "dlrt_comm_open_mpi": (S, [P, ctypes.POINTER(_CommOptions), ctypes.POINTER(P)]),
        "dlrt_comm_destroy": (None, [P]),
        "dlrt_comm_rank": (S, [P]),
        "dlrt_comm_size": (S, [P]),
        "dlrt_comm_allreduce": (S, [P, P, sz, ctypes.c_float]),
        "dlrt_comm_broadcast": (S, [P, P, sz, S]),
        "dlrt_comm_barrier": (S, [P]),
        "dlrt_session_bind_comm": (S, [P, P, sz]),
        "dlrt_session_set_chunks": (S, [P, S]),
        "dlrt_session_chunks": (S, [P]),
        "dlrt_session_comm_stats": (
            None,
            [P, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double),
             ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(S)],
        ),
        "dlrt_evaluate_accuracy": (
            S,
            [P, P, cs, cs, cs, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)],
        ),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    _lib = lib
    return lib


_ERR_INVALID_ARG = 1
_MAX_THREADS = 256  # DLRT_MAX_THREADS


def _check(status, what):
    """Raises for a failed runtime call: ArgumentError for DLRT_ERR_INVALID_ARG (the caller's
    mistake), Error for the others; the message is dlrt_last_error()'s."""
    if status != _OK:
        lib = _load_lib()
        msg = lib.dlrt_last_error().decode("utf-8", "replace")
        if not msg:
            msg = lib.dlrt_status_str(status).decode()
        cls = ArgumentError if status == _ERR_INVALID_ARG else Error
        raise cls(f"{what}: {msg}")


def version():
    """libdlrt's version string."""
    return _load_lib().dlrt_version().decode()


# ------------------------------------------------------------------------------------------
# Model

# device: where the tensor lives in a session ("cpu"; "cuda" for a CUDA artifact).
TensorDesc = collections.namedtuple(
    "TensorDesc", "name dtype dtype_name shape nbytes device", defaults=("cpu",)
)
StepInfo = collections.namedtuple("StepInfo", "loss skipped grad_norm loss_scale step")
# What Session.train's callback sees (runtime/dlrt.h, dlrt_train_event): kind is "batch" (bound,
# before the step), "step" (after it: info, nonfinite, first_nonfinite, stop) or "epoch" (its
# totals); batch_seq / batch_wait_ms describe the batch of "batch" and "step" events.
TrainEvent = collections.namedtuple(
    "TrainEvent",
    "kind epoch batch step steps_per_epoch total_steps batch_size lr info loss_scale_used "
    "nonfinite first_nonfinite stop streak max_skipped loss_sum skipped wait_ms epoch_s run_s "
    "batch_seq batch_wait_ms",
)
TrainResult = collections.namedtuple("TrainResult", "steps nonfinite diverged stopped base_lr")
_EVENT_KINDS = ("batch", "step", "epoch")


def lr_at(schedule, lr, t, total, warmup=0):
    """The learning rate of step t (0-based) of `total` from base rate `lr` under `schedule`
    ("constant", "step", "cosine", "warmup-cosine", "one-cycle"; warmup: its W): the runtime's schedule, as
    `dlcc train --lr-schedule` uses it."""
    lib = _load_lib()
    k = ctypes.c_int()
    _check(lib.dlrt_lr_schedule_parse(_name_arg("schedule", schedule), ctypes.byref(k)),
           "lr_at")
    return float(lib.dlrt_lr_schedule_at(k.value, float(lr), _integer("t", t, *_C_INT64),
                                         _integer("total", total, *_C_INT64),
                                         _integer("warmup", warmup, *_C_INT64)))


def _train_event(ev):
    g = ev.guard.contents if ev.guard else _Guard()
    data = _LoaderBatch.from_address(ev.data) if ev.data else None
    i = ev.info
    return TrainEvent(
        _EVENT_KINDS[ev.kind] if 0 <= ev.kind < len(_EVENT_KINDS) else str(ev.kind),
        int(ev.epoch), int(ev.batch), int(ev.step), int(ev.steps_per_epoch),
        int(ev.total_steps), int(ev.batch_size), float(ev.lr),
        StepInfo(float(i.loss), bool(i.skipped), float(i.grad_norm), float(i.loss_scale),
                 int(i.step)),
        float(ev.loss_scale_used), bool(ev.nonfinite), bool(g.first), bool(g.stop), int(g.run),
        int(g.max), float(ev.loss_sum), int(ev.skipped), float(ev.wait_ms), float(ev.epoch_s),
        float(ev.run_s), int(data.seq) if data else -1, float(data.wait_ms) if data else 0.0,
    )


def _desc(d):
    return TensorDesc(
        d.name.decode(),
        _DTYPES[d.dtype],
        _DTYPE_NAMES[d.dtype],
        tuple(int(d.dims[i]) for i in range(d.rank)),
        int(d.nbytes),
        _load_lib().dlrt_device_name(d.device).decode(),
    )


def _copy_out(fn, h, name, desc, what):
    """A new array holding tensor `name` of session handle `h`, copied into host memory by `fn`
    (dlrt_session_output_copy, dlrt_session_get_param: any device)."""
    a = np.empty(desc.shape, dtype=desc.dtype)
    _check(
        fn(h, name.encode(), a.ctypes.data_as(ctypes.c_void_p), a.nbytes),
        f"reading {what} '{name}'",
    )
    return a


def _as_buffer(desc, value, what):
    """`value` as a C-contiguous ndarray of exactly desc's dtype and shape (no copy when it
    already is one; a copy when it is non-contiguous). Raises ArgumentError on a mismatch."""
    if isinstance(value, np.ndarray):
        a = value
    else:
        try:
            a = np.asarray(value)
        except (TypeError, ValueError) as e:  # e.g. a ragged list
            raise ArgumentError(f"{what} '{desc.name}': not an array ({e})") from None
    if a.dtype != desc.dtype:
        raise ArgumentError(
            f"{what} '{desc.name}': dtype {a.dtype} given, {desc.dtype_name} expected"
        )
    if a.shape != desc.shape:
        raise ArgumentError(
            f"{what} '{desc.name}': shape {list(a.shape)} given, {list(desc.shape)} expected"
        )
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


def _bindable(desc, value, what):
    """`value` as an array dlrt_session_bind_input accepts: _as_buffer's checks, plus aligned to
    the element size (the runtime's requirement). Returns the array itself when it qualifies,
    else a fresh C-ordered copy (NumPy allocations are aligned)."""
    a = _as_buffer(desc, value, what)
    if a.ctypes.data % a.dtype.itemsize != 0:
        a = np.array(a, order="C", copy=True)
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
        # The device the model's code runs on and its sessions' tensors live on ("cpu").
        self.device = lib.dlrt_device_name(lib.dlrt_model_device(handle)).decode()
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
        p = _path_arg("dlcc.load", path)
        _check(lib.dlrt_model_load_file(p, ctypes.byref(h)), f"loading {os.fsdecode(p)}")
        return cls(h)

    def session(self, threads=0, flush_denormals=False):
        """A new session (params initialised from the artifact). threads: 1..256, or 0 (the
        default): $DLRT_THREADS, else the number of cores. flush_denormals=True: steps flush
        denormal floats to zero (x86 MXCSR FTZ and DAZ; see docs/runtime.md)."""
        return Session(self, threads, flush_denormals)

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


class Comm:
    """A communicator for data-parallel training (libdlrt's dlrt_comm over MPI, in the plugin
    libdlrt_mpi.so that libdlrt loads only now). mpi_comm: an mpi4py communicator (its MPI_Comm
    is duplicated; mpi4py initialises MPI with enough thread support), or None: MPI's world,
    with MPI initialised by libdlrt if nobody did (and finalised by close()). timeout: seconds
    one operation waits for another rank before failing with an error naming it (0: the
    default, $DLRT_COMM_TIMEOUT or 300). Collective: every rank creates it. Operations are
    matched across ranks by order. Use as a context manager or close() it."""

    def __init__(self, mpi_comm=None, timeout=0.0):
        self._h = None
        self._lib = _load_lib()
        self._sessions = weakref.WeakSet()
        if not isinstance(timeout, numbers.Real) or not timeout >= 0:
            raise ArgumentError(f"Comm: timeout must be >= 0 seconds, got {timeout!r}")
        addr = None
        if mpi_comm is not None:
            try:
                from mpi4py import MPI
            except ImportError:
                raise ArgumentError(
                    "Comm: an MPI communicator needs mpi4py (Debian: python3-mpi4py)"
                ) from None
            if not isinstance(mpi_comm, MPI.Comm):
                raise ArgumentTypeError(
                    f"Comm: an mpi4py communicator expected, {type(mpi_comm).__name__} given")
            self._mpi = mpi_comm  # keeps the handle alive while duplicated
            addr = MPI._addressof(mpi_comm)
        o = _CommOptions()
        self._lib.dlrt_comm_options_init(ctypes.byref(o))
        o.timeout_s = float(timeout)
        h = ctypes.c_void_p()
        _check(self._lib.dlrt_comm_open_mpi(addr, ctypes.byref(o), ctypes.byref(h)),
               "opening the communicator")
        self._h = h

    def _live(self):
        if not self._h:
            raise ArgumentError("the communicator is closed")
        return self._h

    @property
    def rank(self):
        return int(self._lib.dlrt_comm_rank(self._live()))

    @property
    def size(self):
        return int(self._lib.dlrt_comm_size(self._live()))

    def allreduce(self, array, scale=1.0):
        """In place: array := scale * the sum over ranks (in rank order, the same bits on every
        rank) of each rank's array (a C-contiguous, writable float32 NumPy array)."""
        h = self._live()
        if (not isinstance(array, np.ndarray) or array.dtype != np.float32
                or not array.flags.c_contiguous or not array.flags.writeable):
            raise ArgumentError("allreduce: a writable C-contiguous float32 array expected")
        _check(self._lib.dlrt_comm_allreduce(h, array.ctypes.data_as(ctypes.c_void_p),
                                             array.size, float(scale)), "allreduce")
        return array

    def broadcast(self, array, root=0):
        """In place: every rank's array := root's (a writable C-contiguous NumPy array)."""
        h = self._live()
        if (not isinstance(array, np.ndarray) or not array.flags.c_contiguous
                or not array.flags.writeable):
            raise ArgumentError("broadcast: a writable C-contiguous array expected")
        root = _integer("root", root, 0, self.size - 1)
        _check(self._lib.dlrt_comm_broadcast(h, array.ctypes.data_as(ctypes.c_void_p),
                                             array.nbytes, root), "broadcast")
        return array

    def barrier(self):
        _check(self._lib.dlrt_comm_barrier(self._live()), "barrier")

    def close(self):
        """Unbinds the sessions bound to it, then frees the communicator (idempotent)."""
        if self._h:
            for s in list(self._sessions):
                if s._h:
                    self._lib.dlrt_session_bind_comm(s._h, None, 0)
                s._comm = None
            self._sessions = weakref.WeakSet()
            self._lib.dlrt_comm_destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None):
            self.close()

    def __repr__(self):
        if not self._h:
            return "Comm(closed)"
        return f"Comm(rank={self.rank}, size={self.size})"


def load(path):
    """Loads a compiled artifact file."""
    return Model.load_file(path)


def compile(path, dims=None, cache_dir=None, opt_level=None, use_cache=True):
    """Compiles a .dlg model through the compilation cache (in this process, with libdlcc) and
    loads it. dims: {"N": 64} binds dims; cache_dir: the cache directory (default
    $DLCC_CACHE_DIR, else the user's); opt_level: 0..3 (default 3); use_cache=False compiles
    without the cache. Raises dlcc.Error with the compiler's diagnostics."""
    cc = _load_compiler()
    items = list((dims or {}).items())
    names = (ctypes.c_char_p * max(len(items), 1))(*[str(k).encode() for k, _ in items])
    # Range-checked before ctypes, which would keep only the low 64 bits (2**64 + 4 -> 4).
    for k, v in items:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise ArgumentTypeError(
                f"dims: every value must be an integer ({k!r}: {type(v).__name__} given)"
            )
    values = (ctypes.c_int64 * max(len(items), 1))(
        *[_integer(f"dims[{k!r}]", v, -(2**63), 2**63 - 1) for k, v in items]
    )
    art = ctypes.c_void_p()
    art_len = ctypes.c_size_t()
    hit = ctypes.c_int()
    msgs = ctypes.c_void_p()
    st = cc.dlcc_lib_compile(
        os.fsencode(path),
        names,
        values,
        len(items),
        None if cache_dir is None else os.fsencode(cache_dir),
        1 if use_cache else 0,
        -1 if opt_level is None else _integer("opt_level", opt_level, 0, 3),
        ctypes.byref(art),
        ctypes.byref(art_len),
        ctypes.byref(hit),
        ctypes.byref(msgs),
    )
    text = ""
    if msgs.value:
        text = ctypes.string_at(msgs.value).decode("utf-8", "replace").strip()
        cc.dlcc_lib_free(msgs)
    if st != 0:
        raise Error(text or f"compiling {os.fspath(path)} failed (status {st})")
    try:
        lib = _load_lib()
        h = ctypes.c_void_p()
        _check(lib.dlrt_model_load_memory(art, art_len.value, ctypes.byref(h)),
               f"loading the artifact of {os.fspath(path)}")
    finally:
        cc.dlcc_lib_free(art)
    m = Model(h)
    m.cache_hit = bool(hit.value)
    m.messages = text  # warnings, e.g. an unusable cache (the compile went on without it)
    return m


# ------------------------------------------------------------------------------------------
# Session


class _Params(collections.abc.Mapping):
    """name -> NumPy copy of a param (or an optimizer state tensor "PARAM.SLOT"). An unknown
    name raises KeyError (as a Mapping must, so `in` and .get() work)."""

    def __init__(self, session):
        self._s = session

    def __getitem__(self, name):
        if not isinstance(name, str) or name not in self._s._par:
            raise KeyError(name)
        return self._s.get_param(name)

    def __contains__(self, name):
        return isinstance(name, str) and name in self._s._par

    def __iter__(self):
        return iter([d.name for d in self._s.model.params])

    def __len__(self):
        return len(self._s.model.params)

    def __setitem__(self, name, value):
        self._s.set_param(name, value)


class _SessionHandle:
    """Owns the native session. Referenced by its Session and by the buffer of every output view
    (infer(copy=False), output(copy=False)): dlrt_session_destroy runs once all of them are gone,
    so a view never outlives the memory it shows."""

    def __init__(self, lib, h):
        self.lib = lib
        self.h = h

    def __del__(self):
        if self.h:
            self.lib.dlrt_session_destroy(self.h)
            self.h = None


class Session:
    """Per-run state of a model. Use from one thread at a time."""

    def __init__(self, model, threads=0, flush_denormals=False):
        self._handle = None
        self._h = None
        if not isinstance(model, Model):
            raise ArgumentTypeError(
                f"Session: a dlcc.Model expected, {type(model).__name__} given "
                f"(use model.session())"
            )
        self.model = model
        self._lib = model._lib
        threads = _integer("threads", threads, 0, _MAX_THREADS)
        if not isinstance(flush_denormals, bool):
            raise ArgumentTypeError(
                f"flush_denormals: True or False expected, {type(flush_denormals).__name__} given"
            )
        if not model._h:
            raise ArgumentError("the model is closed")
        opts = _SessionOptions()
        self._lib.dlrt_session_options_init(ctypes.byref(opts))
        opts.threads = threads
        opts.flush_denormals = int(flush_denormals)
        h = ctypes.c_void_p()
        _check(
            self._lib.dlrt_session_create_ex(model._h, ctypes.byref(opts), ctypes.byref(h)),
            "creating a session",
        )
        self._handle = _SessionHandle(self._lib, h)
        self._h = h
        self._comm = None  # the Comm bound with bind_comm (kept alive while bound)
        self._in = {d.name: d for d in model.inputs}
        self._out = {d.name: d for d in model.outputs}
        self._par = {d.name: d for d in model.params + model.state}
        # input name -> the array bound to it with dlrt_session_bind_input. Holding the reference
        # keeps the memory alive while the runtime reads it; replaced on rebind, dropped when
        # the input is set by copy or the session is closed.
        self._bound = {}
        # [(start, end, name)] of the output buffers (fixed in the session's arena from
        # creation): a bound input must not overlap them, since steps write there.
        self._out_ranges = []
        for name, d in self._out.items():
            ptr = ctypes.c_void_p()
            _check(
                self._lib.dlrt_session_output(h, name.encode(), ctypes.byref(ptr), None),
                f"locating output '{name}'",
            )
            if ptr.value:
                self._out_ranges.append((ptr.value, ptr.value + d.nbytes, name))

    @property
    def threads(self):
        return int(self._lib.dlrt_session_threads(self._live()))

    @property
    def device(self):
        """The device the session's tensors live on ("cpu")."""
        return self._lib.dlrt_device_name(self._lib.dlrt_session_device(self._live())).decode()

    @property
    def closed(self):
        return not self._h

    def close(self):
        """Closes the session (idempotent): every method raises ArgumentError from now on and
        the references to bound inputs are dropped. The native session is destroyed at once,
        unless output views (copy=False) are still alive: then when the last of them goes, so
        they stay readable (they keep the outputs of the last step)."""
        self._h = None
        self._handle = None
        self._bound = {}
        if getattr(self, "_comm", None) is not None:
            self._comm._sessions.discard(self)
            self._comm = None

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
            raise ArgumentError("the session is closed")
        return self._h

    def set_input(self, name, value, copy=False):
        """Sets input `name` for the following steps.

        Default (zero-copy): `value` must be an ndarray (or array-like) of the input's exact
        dtype and shape. A C-contiguous array aligned to its element size is bound by pointer
        (dlrt_session_bind_input): the steps read it in place, so in-place changes to it are
        seen by the next step, and the session keeps a reference to it until the input is bound
        again, set with copy=True or the session is closed. Any other array (non-contiguous,
        misaligned) is copied once into a contiguous array that the session keeps and binds.
        copy=True copies `value` into the session's own memory (dlrt_session_set_input) and
        drops any reference kept for this input. A session whose tensors live on a GPU (device
        "cuda") always copies: its kernels cannot read host memory. Raises Error for an unknown
        name, a wrong dtype or shape (never converted), or memory overlapping an output buffer."""
        h = self._live()
        _name_arg("set_input", name)
        d = self._in.get(name)
        if d is None:
            raise ArgumentError(f"unknown input '{name}' (inputs: {', '.join(self._in)})")
        if copy or d.device != "cpu":
            a = _as_buffer(d, value, "input")
            _check(
                self._lib.dlrt_session_set_input(
                    h, name.encode(), a.ctypes.data_as(ctypes.c_void_p), a.nbytes
                ),
                f"setting input '{name}'",
            )
            self._bound.pop(name, None)
            return
        chunks = self._lib.dlrt_session_chunks(h)
        if chunks > 1:  # a session of chunks: every chunk's batch at once, along the first dim
            d = d._replace(shape=(d.shape[0] * chunks,) + d.shape[1:], nbytes=d.nbytes * chunks)
        a = _bindable(d, value, "input")
        start = a.ctypes.data
        end = start + a.nbytes
        for o_start, o_end, o_name in self._out_ranges:
            if start < o_end and o_start < end:
                raise ArgumentError(
                    f"input '{name}': the array overlaps output '{o_name}' of this session "
                    f"(steps write it); pass a copy"
                )
        _check(
            self._lib.dlrt_session_bind_input(h, name.encode(), ctypes.c_void_p(start), a.nbytes),
            f"binding input '{name}'",
        )
        self._bound[name] = a  # after success: a failed bind leaves the old binding in place

    def _set_inputs(self, inputs):
        for name, value in inputs.items():
            self.set_input(name, value)

    def output(self, name, copy=True):
        """Output `name` of the last step: a copy (dlrt_session_output_copy, on any device), or
        with copy=False a read-only view of the session's buffer (a CPU session only): it shows
        the output of the latest step (the next step overwrites it) and keeps the native session
        alive, so it stays readable after close()."""
        h = self._live()
        _name_arg("output", name)
        d = self._out.get(name)
        if d is None:
            raise ArgumentError(f"unknown output '{name}' (outputs: {', '.join(self._out)})")
        if copy:
            return _copy_out(self._lib.dlrt_session_output_copy, h, name, d, "output")
        if d.device != "cpu":
            raise Error(f"output '{name}' lives on the {d.device} device: read it with copy=True")
        ptr = ctypes.c_void_p()
        _check(
            self._lib.dlrt_session_output(h, name.encode(), ctypes.byref(ptr), None),
            f"reading output '{name}'",
        )
        buf = (ctypes.c_char * max(d.nbytes, 1)).from_address(ptr.value)
        a = np.frombuffer(buf, dtype=d.dtype, count=int(np.prod(d.shape, dtype=np.int64)))
        a = a.reshape(d.shape)
        buf._dlcc_session = self._handle  # the view's base chain ends at buf: it holds the session
        a.flags.writeable = False
        return a

    def infer(self, copy=True, **inputs):
        """Binds the given inputs (zero-copy, as set_input) and runs the infer entry point;
        returns {output name: array} (copies; with copy=False read-only views valid until the
        next step). Inputs not given keep what was bound or set last, so s.infer() reruns on
        the current contents of the bound arrays. (`copy` names the outputs' copying; an input
        cannot be called "copy".)"""
        self._set_inputs(inputs)
        _check(self._lib.dlrt_session_infer(self._live()), "infer")
        return {name: self.output(name, copy=copy) for name in self._out}

    def train_step(self, **inputs):
        """Binds the given inputs (zero-copy, as set_input) and runs one train step; returns a
        StepInfo. Inputs not given keep what was bound or set last (s.train_step() with no
        arguments steps on the current contents of the bound arrays)."""
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

    def train(self, loader, data_input, label_input, epochs=1, schedule="constant", lr=None,
              warmup=None, max_skipped_steps=10, callback=None):
        """The runtime's training loop (dlrt_train_run, shared with `dlcc train`): `epochs`
        epochs of the loader's batches, each bound in place to `data_input` / `label_input`,
        "lr" set from `schedule` ("constant", "step", "cosine", "warmup-cosine", "one-cycle"; lr=None: the
        model's; warmup=None: 5% of the steps) before each step, and the non-finite guard
        (stop after max_skipped_steps non-finite steps in a streak; 0: never). callback(event)
        gets a TrainEvent per batch, step and epoch; a true return stops the run, an exception
        stops it and is raised here. Returns a TrainResult (diverged: the guard stopped it)."""
        lib = self._lib
        handle = loader._live()
        o = _TrainOptions()
        lib.dlrt_train_options_init(ctypes.byref(o))
        o.data_input = _name_arg("data_input", data_input)
        o.label_input = _name_arg("label_input", label_input)
        o.epochs = _integer("epochs", epochs, 1, _C_INT64[1])
        k = ctypes.c_int()
        _check(lib.dlrt_lr_schedule_parse(_name_arg("schedule", schedule), ctypes.byref(k)),
               "train")
        o.schedule = k.value
        if lr is not None:
            o.lr = float(lr)
        if warmup is not None:
            o.warmup = _integer("warmup", warmup, 0, _C_INT64[1])
        o.max_skipped = _integer("max_skipped_steps", max_skipped_steps, 0, _C_INT64[1])
        raised = []

        def on_event(_user, ev):
            try:
                return 1 if callback(_train_event(ev.contents)) else 0
            except BaseException as e:  # ctypes would swallow it: stop and raise it below
                raised.append(e)
                return 1

        cb = _TRAIN_CALLBACK(on_event) if callback else _TRAIN_CALLBACK()
        o.callback = cb
        r = _TrainResult()
        st = lib.dlrt_train_run(self._live(), handle.h, ctypes.byref(o), ctypes.byref(r))
        # The inputs stay bound to the loader's slots: keep its memory alive as long as that.
        self._bound[data_input] = self._bound[label_input] = handle
        if raised:
            raise raised[0]
        _check(st, "train")
        return TrainResult(int(r.steps), int(r.nonfinite), bool(r.diverged), bool(r.stopped),
                           float(r.base_lr))

    def evaluate_accuracy(self, loader, data_input, label_input, scores_output):
        """The test accuracy with the infer entry point over every batch the loader has left
        (dlrt_evaluate_accuracy): argmax of the float [batch, C] output `scores_output` per
        real row against its label. Returns (correct, total)."""
        handle = loader._live()
        correct, total = ctypes.c_int64(), ctypes.c_int64()
        _check(
            self._lib.dlrt_evaluate_accuracy(
                self._live(), handle.h, _name_arg("data_input", data_input),
                _name_arg("label_input", label_input), _name_arg("scores_output", scores_output),
                ctypes.byref(correct), ctypes.byref(total)),
            "evaluate_accuracy",
        )
        self._bound[data_input] = self._bound[label_input] = handle  # as in train
        return int(correct.value), int(total.value)

    def bind_comm(self, comm, bucket_bytes=0):
        """Data parallelism (dlrt_session_bind_comm, collective: every rank calls it): checks
        that every rank runs the same artifact, copies rank 0's params and optimizer state to
        all, and from now on every train_step all-reduces the gradients (their mean over the
        ranks) in buckets of bucket_bytes (0: 25 MiB) before the update. comm None unbinds."""
        h = self._live()
        if comm is not None and not isinstance(comm, Comm):
            raise ArgumentTypeError(
                f"bind_comm: a dlcc.Comm expected, {type(comm).__name__} given")
        bucket_bytes = _integer("bucket_bytes", bucket_bytes, 0, 2**63 - 1)
        ch = comm._live() if comm is not None else None
        _check(self._lib.dlrt_session_bind_comm(h, ch, bucket_bytes), "bind_comm")
        if self._comm is not None:
            self._comm._sessions.discard(self)
        self._comm = comm
        if comm is not None:
            comm._sessions.add(self)

    def set_chunks(self, n):
        """Deterministic data parallelism in one process (dlrt_session_set_chunks): with n > 1
        every train_step takes n batches at once (each input n times the model's first dim,
        chunk r the r-th part, bound zero-copy: set_input's copy=True is refused at the step)
        and gives the params of n data-parallel ranks bit for bit when rank r is given chunk r:
        forward and backward once per chunk, their gradients and losses summed in chunk order
        and scaled by 1/n as the all-reduce does, then one update. With gradient accumulation
        each chunk keeps its own accumulators as each rank does (the session's grad_accum
        tensors hold chunk 0's). n = 1 turns it off (give the inputs again). Not with
        bind_comm."""
        n = _integer("set_chunks", n, 1, 4096)
        _check(self._lib.dlrt_session_set_chunks(self._live(), n), "set_chunks")
        self._bound.clear()  # the inputs must be given again, n batches each

    def comm_stats(self):
        """The last data-parallel step's communication: {"wait_ms": the time the step waited
        for all-reduces after backward, "comm_ms": their time on the communicator's thread,
        "bytes": bytes reduced per rank, "buckets": their count} (zeros when unbound)."""
        w, c = ctypes.c_double(), ctypes.c_double()
        b, n = ctypes.c_uint64(), ctypes.c_int()
        self._lib.dlrt_session_comm_stats(self._live(), ctypes.byref(w), ctypes.byref(c),
                                          ctypes.byref(b), ctypes.byref(n))
        return {"wait_ms": w.value, "comm_ms": c.value, "bytes": int(b.value),
                "buckets": int(n.value)}

    @property
    def params(self):
        return _Params(self)

    def get_param(self, name):
        h = self._live()
        _name_arg("get_param", name)
        d = self._par.get(name)
        if d is None:
            raise ArgumentError(f"unknown param '{name}'")
        return _copy_out(self._lib.dlrt_session_get_param, h, name, d, "param")

    def set_param(self, name, value):
        h = self._live()
        _name_arg("set_param", name)
        d = self._par.get(name)
        if d is None:
            raise ArgumentError(f"unknown param '{name}'")
        a = _as_buffer(d, value, "param")
        _check(
            self._lib.dlrt_session_set_param(
                h, name.encode(), a.ctypes.data_as(ctypes.c_void_p), a.nbytes
            ),
            f"writing param '{name}'",
        )

    def get_hparam(self, name):
        h = self._live()
        b = _name_arg("get_hparam", name)
        v = ctypes.c_double()
        _check(
            self._lib.dlrt_session_get_hparam(h, b, ctypes.byref(v)),
            f"reading hparam '{name}'",
        )
        return v.value

    def set_hparam(self, name, value):
        h = self._live()
        b = _name_arg("set_hparam", name)
        if not isinstance(value, numbers.Real):
            raise ArgumentTypeError(
                f"set_hparam: a real number expected for '{name}', {type(value).__name__} given"
            )
        _check(self._lib.dlrt_session_set_hparam(h, b, float(value)), f"setting hparam '{name}'")

    def save(self, path):
        """Writes a safetensors checkpoint (params, optimizer state, step) atomically."""
        h = self._live()
        p = _path_arg("save", path)
        _check(self._lib.dlrt_session_save(h, p), f"saving {os.fsdecode(p)}")

    def load(self, path, rename=None, ignore_unknown=False):
        """Loads a safetensors checkpoint (or a subset of it) and returns the load's notices as
        (name, what) pairs: PyTorch-only buffers skipped (num_batches_tracked), unknown names
        skipped with ignore_unknown=True, params the file lacks (they keep their values).
        rename: {file name: model name}, or a list of such pairs applied in order; a pair whose
        sides both end in '*' renames a prefix ({"encoder.*": "enc.*"}), e.g. to load a PyTorch
        state_dict saved with safetensors. A file that cannot be read or is not a valid
        checkpoint of this model raises Error and leaves the session unchanged."""
        h = self._live()
        p = _path_arg("load", path)
        pairs = list(rename.items()) if isinstance(rename, dict) else list(rename or [])
        for pair in pairs:
            if (
                not isinstance(pair, (tuple, list))
                or len(pair) != 2
                or not all(isinstance(x, str) for x in pair)
            ):
                raise ArgumentTypeError(f"load: rename: (str, str) pairs expected, {pair!r} given")
        rules = (_LoadRule * max(len(pairs), 1))()
        for i, (a, b) in enumerate(pairs):
            rules[i].from_ = a.encode()
            rules[i].to = b.encode()
        notices = []

        def on_notice(_user, name, what):
            notices.append((name.decode(errors="replace"), what.decode(errors="replace")))

        o = _LoadOptions()
        o.rules = rules
        o.n_rules = len(pairs)
        if not isinstance(ignore_unknown, (bool, np.bool_)):
            raise ArgumentTypeError(
                f"load: ignore_unknown: True or False expected, {ignore_unknown!r} given"
            )
        o.ignore_unknown = 1 if ignore_unknown else 0
        o.notice = _LOAD_NOTICE(on_notice)
        _check(self._lib.dlrt_session_load_with(h, p, ctypes.byref(o)), f"loading {os.fsdecode(p)}")
        return notices


# ------------------------------------------------------------------------------------------
# Data loader

LoaderInfo = collections.namedtuple(
    "LoaderInfo",
    "n_samples batches_per_epoch sample_dims sample_numel n_channels mean std epoch_samples",
)
LoaderInfo.__doc__ = """What a Loader holds: n_samples (after `limit`), batches_per_epoch (of
its shard), epoch_samples (positions of an epoch in its shard; n_samples without shards),
sample_dims (a tuple), sample_numel, and the normalisation applied: n_channels channels (the
first dim of [C, H, W] samples with per-channel normalisation, else 1) and mean, std (tuples of
n_channels floats; (0.0,) and (1.0,) without normalisation). Pass (info.mean, info.std) as an
evaluation loader's `normalize` to normalise it the same way."""
ArrayInfo = collections.namedtuple(
    "ArrayInfo", "name path dtype sample_dims n_channels mean std"
)
ArrayInfo.__doc__ = """One array of a Loader.arrays loader (Loader.arrays_info): the input name,
the file it was read from, the dtype of its batches, its per-sample dims, and its normalisation
(n_channels values of mean and std; 0 and () without normalisation)."""
LoaderStats = collections.namedtuple(
    "LoaderStats", "batches first_wait_ms mean_wait_ms max_wait_ms"
)
LoaderStats.__doc__ = """Waiting statistics of Loader.next since creation: batches handed out,
the first batch's wait (includes the producers' start-up), the mean and the longest wait of
the later batches (ms)."""

_LAST = {"drop": 0, "pad": 1}
_NORM_NONE, _NORM_GIVEN, _NORM_COMPUTE = 0, 1, 2
_LABEL_DTYPES = {np.dtype(np.int64): 4, np.dtype(np.int32): 3}
_C_INT = (-(2**31), 2**31 - 1)
_C_INT64 = (-(2**63), 2**63 - 1)
_C_UINT64 = (0, 2**64 - 1)
# Integer options: name -> (range of the C field).
_LOADER_INTS = {
    "batch_size": _C_INT64,
    "producers": _C_INT,
    "slots": _C_INT,
    "seed": _C_UINT64,
    "pad_label": _C_INT64,
    "epochs": _C_INT64,
    "crop_pad": _C_INT,
    "limit": _C_INT64,
    "n_classes": _C_INT64,
    "shard_count": _C_INT64,
    "shard_index": _C_INT64,
}
_LOADER_OPTIONS = sorted(
    list(_LOADER_INTS)
    + ["shuffle", "last", "scale", "normalize", "hflip", "label_dtype", "u8_to_unit"]
)


def _int_option(name, value, lo, hi):
    return _integer(f"loader option {name}", value, lo, hi)


def _bool_option(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"loader option {name}: True or False expected, {value!r} given")
    return 1 if value else 0


def _norm_values(name, value):
    try:
        a = np.asarray(value)
    except (TypeError, ValueError):
        a = np.asarray(None)
    if a.dtype.kind not in "iuf" or a.ndim > 1:
        raise ArgumentError(
            f"loader option normalize: {name} must be a number or a list of numbers"
        )
    return [float(v) for v in np.atleast_1d(a)]


def _loader_options(lib, opts):
    """dlrt_loader_options from Loader's keyword options (see Loader). Checks types and
    Python-side spellings; the runtime checks the values and says what is wrong."""
    o = _LoaderOptions()
    lib.dlrt_loader_options_init(ctypes.byref(o))
    label_dtype = np.dtype(np.int64)
    for name, value in opts.items():
        if name in _LOADER_INTS:
            setattr(o, name, _int_option(name, value, *_LOADER_INTS[name]))
        elif name == "shuffle":
            o.shuffle = _bool_option(name, value)
        elif name == "hflip":
            o.hflip = _bool_option(name, value)
        elif name == "u8_to_unit":
            o.u8_to_unit = _bool_option(name, value)
        elif name == "last":
            if not isinstance(value, str) or value not in _LAST:
                raise ArgumentError(
                    f"loader option last: 'drop' or 'pad' expected, {value!r} given"
                )
            o.last = _LAST[value]
        elif name == "scale":
            if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)
            ):
                raise ArgumentTypeError(f"loader option scale: a number expected, {value!r} given")
            o.scale = float(value)
        elif name == "normalize":
            if isinstance(value, str):
                if value == "none":
                    o.norm = _NORM_NONE
                elif value == "compute":
                    o.norm = _NORM_COMPUTE
                else:
                    raise ArgumentError(
                        f"loader option normalize: 'none', 'compute' or (mean, std) expected, "
                        f"{value!r} given"
                    )
            else:
                if not isinstance(value, (tuple, list)) or len(value) != 2:
                    raise ArgumentError(
                        f"loader option normalize: 'none', 'compute' or (mean, std) expected, "
                        f"{value!r} given"
                    )
                mean = _norm_values("mean", value[0])
                std = _norm_values("std", value[1])
                if len(mean) != len(std) or not 1 <= len(mean) <= _LOADER_MAX_CHANNELS:
                    raise ArgumentError(
                        f"loader option normalize: mean and std need the same number of values "
                        f"(1 for every channel, or one per channel, at most "
                        f"{_LOADER_MAX_CHANNELS}); {len(mean)} and {len(std)} given"
                    )
                o.norm = _NORM_GIVEN
                o.n_norm = len(mean)
                for c, (m, sd) in enumerate(zip(mean, std)):
                    o.mean[c] = m
                    o.std[c] = sd
        elif name == "label_dtype":  # dlrt_loader_options.labels ("labels" names the file)
            try:
                dt = np.dtype(value)
            except (TypeError, ValueError):
                dt = None
            if dt not in _LABEL_DTYPES:
                raise ArgumentError(
                    f"loader option label_dtype: np.int64 or np.int32 expected, {value!r} given"
                )
            label_dtype = dt
            o.labels = _LABEL_DTYPES[dt]
        else:
            raise ArgumentError(
                f"unknown loader option '{name}' (options: {', '.join(_LOADER_OPTIONS)})"
            )
    return o, label_dtype


class _LoaderHandle:
    """Owns the native loader. Referenced by its Loader and by every borrowed batch (and so by
    every view of one): dlrt_loader_destroy, which frees the slots, runs only once all of them
    are gone, so no view can outlive the memory it shows."""

    def __init__(self, lib, h):
        self.lib = lib
        self.h = h

    def __del__(self):
        if self.h:
            self.lib.dlrt_loader_destroy(self.h)
            self.h = None


class _Slot:
    """One borrowed batch (a dlrt_loader_batch). Referenced by its Batch and by the buffers of
    its x / y views; gives the slot back on release(), or when the last reference goes."""

    def __init__(self, handle, cbatch):
        self.handle = handle
        self.cbatch = cbatch
        self.held = True

    def release(self):
        if self.held:
            self.held = False
            _check(
                self.handle.lib.dlrt_loader_release(self.handle.h, ctypes.byref(self.cbatch)),
                "releasing a batch",
            )

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


def _slot_view(slot, ptr, dtype, shape):
    """A read-only ndarray over `ptr` (loader memory) whose buffer keeps `slot` alive."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buf = (ctypes.c_char * nbytes).from_address(ptr)
    buf._dlcc_slot = slot  # the view's base chain ends at buf, which holds the slot
    a = np.frombuffer(buf, dtype=dtype).reshape(shape)
    a.flags.writeable = False
    return a


class Batch:
    """A batch borrowed from a Loader: x (float32 [batch_size, *sample_dims]) and y (labels
    [batch_size], int64 or int32; None without labels) are read-only VIEWS of the loader's slot,
    no copy; the first n_valid rows are real samples (the others padding, with last="pad").
    A batch of Loader.arrays holds one view per named array instead: b["x"], or b.arrays (a
    dict, e.g. session.train_step(**b.arrays)); its x and y are None.
    Also epoch, index (within the epoch), seq (batch number since creation) and wait_ms (how
    long next() waited for it).

    Release it once done (release(), `with loader.next() as b:`, or let iteration do it) so the
    producers can refill its slot. After release, b.x / b.y raise Error, and views taken from
    them before become INVALID: their memory is recycled for later batches (copy what you keep).
    A Batch that is never released keeps its slot until it and every view of it are gone."""

    def __init__(self, slot, x, y, cb, arrays=None):
        self._slot = slot
        self._x = x
        self._y = y
        self._arrays = arrays
        self._released = False
        self.n_valid = int(cb.n_valid)
        self.epoch = int(cb.epoch)
        self.index = int(cb.index)
        self.seq = int(cb.seq)
        self.wait_ms = float(cb.wait_ms)

    @property
    def released(self):
        return self._released

    def _held(self):
        if self._released:
            raise ArgumentError(
                f"batch {self.seq} was released; its memory belongs to the loader again"
            )

    @property
    def x(self):
        self._held()
        return self._x

    @property
    def y(self):
        self._held()
        return self._y

    @property
    def arrays(self):
        """{name: view} of a Loader.arrays batch (a new dict each time; {} for other loaders)."""
        self._held()
        return dict(self._arrays or {})

    def __getitem__(self, name):
        self._held()
        if not self._arrays or name not in self._arrays:
            raise ArgumentError(
                f"the batch has no array '{name}' (arrays: {', '.join(self._arrays or []) or 'none'})"
            )
        return self._arrays[name]

    def release(self):
        """Gives the slot back to the loader (idempotent)."""
        if self._released:
            return
        self._released = True
        self._x = self._y = self._arrays = None
        self._slot.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        if self._released:
            state = "released"
        elif self._arrays is not None:
            state = " ".join(f"{k}{list(v.shape)}" for k, v in self._arrays.items())
        else:
            state = f"x{list(self._x.shape)}"
        return (
            f"<dlcc.Batch epoch={self.epoch} index={self.index} n_valid={self.n_valid} "
            f"{state}>"
        )


class Loader:
    """libdlrt's data loader: `producers` threads read, decode and transform samples into a
    ring of `slots` batch slots in the background; next() borrows the next batch in place.

        loader = dlcc.Loader.idx("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                 batch_size=128, producers=2, seed=0, scale=1 / 255,
                                 normalize="compute")
        loader = dlcc.Loader.npy("x.npy", "y.npy", batch_size=64)

    Keyword options (defaults as dlrt_loader_options_init; see runtime/dlrt.h, docs/loader.md):
      batch_size=32, producers=1, slots=4, seed=0 (uint64), shuffle=True (a new permutation
      each epoch; False: file order), last="drop" (a partial final batch is left out) or "pad"
      (a final batch with n_valid < batch_size, padded with zeros and pad_label), pad_label=-1,
      epochs=0 (endless; else iteration stops after that many epochs), scale=1.0 (raw value
      multiplier, e.g. 1 / 255), normalize="none" | "compute" (per-channel mean and population
      std of the scaled data, computed at creation) | (mean, std) (numbers or per-channel
      lists), crop_pad=0, hflip=False (random crop / horizontal flip of [H, W] and [C, H, W]
      samples), label_dtype=np.int64 | np.int32 (the dtype of y; the C option `labels`),
      limit=0 (> 0: only the first
      `limit` samples), n_classes=0 (> 0: every label must lie in [0, n_classes), checked at
      creation), u8_to_unit=False (True: uint8 data is divided by 255 before `scale`, other
      types are not), shard_count=1, shard_index=0 (data parallelism: this loader gives shard
      shard_index of shard_count, positions shard_index, shard_index + shard_count, ... of each
      epoch's order, as PyTorch's DistributedSampler; give every rank the same seed).
    Bad options raise Error (unknown names, wrong types, or the runtime's message).

    The batches' bytes depend only on the options and the seed (never on producers, slots or
    timing). Iterating (`for b in loader:`) yields Batch objects and RELEASES EACH BATCH WHEN
    THE NEXT ONE IS TAKEN (and the last one when the loop ends or is broken out of), so a
    batch's views must not be used after its iteration step; next() never releases anything
    (release yourself; up to `slots` batches may be held). Use from one thread at a time.
    close() (or the context manager) stops the producers and frees the slots as soon as no
    batch of the loader, and no view of one, is alive any more."""

    def __init__(self, handle, batch_size, label_dtype):
        """Private: use Loader.idx, Loader.npy or Loader.arrays."""
        self._handle = handle
        self.batch_size = batch_size
        self._label_dtype = label_dtype
        lib = handle.lib
        arrays = []
        for i in range(lib.dlrt_loader_num_arrays(handle.h)):
            ai = _LoaderArrayInfo()
            _check(lib.dlrt_loader_array_info_get(handle.h, i, ctypes.byref(ai)), "data loader")
            nch = int(ai.n_channels)
            arrays.append(ArrayInfo(
                ai.name.decode(errors="replace"),
                os.fsdecode(ai.path),
                _DTYPES[int(ai.dtype)],
                tuple(int(ai.sample_dims[k]) for k in range(ai.sample_rank)),
                nch,
                tuple(float(ai.mean[c]) for c in range(nch)),
                tuple(float(ai.std[c]) for c in range(nch)),
            ))
        self.arrays_info = tuple(arrays)
        info = _LoaderInfo()
        handle.lib.dlrt_loader_info_get(handle.h, ctypes.byref(info))
        nch = int(info.n_channels)
        self.info = LoaderInfo(
            int(info.n_samples),
            int(info.batches_per_epoch),
            tuple(int(info.sample_dims[i]) for i in range(info.sample_rank)),
            int(info.sample_numel),
            nch,
            tuple(float(info.mean[c]) for c in range(nch)),
            tuple(float(info.std[c]) for c in range(nch)),
            int(info.epoch_samples),
        )

    @classmethod
    def _create(cls, fn, a, b, opts):
        lib = _load_lib()
        a = _path_arg("data loader", a)
        b = None if b is None else _path_arg("data loader labels", b)
        o, label_dtype = _loader_options(lib, opts)
        h = ctypes.c_void_p()
        _check(fn(a, b, ctypes.byref(o), ctypes.byref(h)),
               f"data loader over {os.fsdecode(a)}")
        return cls(_LoaderHandle(lib, h), int(o.batch_size), label_dtype)

    @classmethod
    def idx(cls, images, labels=None, **opts):
        """A loader over an IDX image file ([N, ...], any IDX element type) and an IDX label
        file ([N], integers; None: no labels, y is None), plain or gzip, e.g. Fashion-MNIST's.
        Options: see Loader."""
        lib = _load_lib()
        return cls._create(lib.dlrt_loader_create_idx, images, labels, opts)

    @classmethod
    def npy(cls, x, y=None, **opts):
        """A loader over .npy files: x [N, ...] of float32, float64, uint8, int8, int16, int32
        or int64 (C order, little-endian); y [N] integers (None: no labels). Options: see
        Loader."""
        lib = _load_lib()
        return cls._create(lib.dlrt_loader_create_npy, x, y, opts)

    @classmethod
    def arrays(cls, arrays, *, dtypes=None, normalize=None, n_classes=None, **opts):
        """A loader over named arrays, one per model input (libdlrt's dlrt_loader_create_arrays):
        data, float regression targets, integer labels, masks, several inputs. `arrays` is a dict
        {input name: ndarray or .npy file name}; every array's first dim is the sample count,
        the same for all, and row i of every array is sample i (shuffled, batched, sharded
        together). Each batch is a dict of views, b.arrays ({name: [batch_size, ...]}), ready for
        session.train_step(**b.arrays) (zero-copy).

            with dlcc.Loader.arrays({"x": X, "y": Y}, batch_size=64, normalize={"x": "compute"},
                                    n_classes={"y": 10}) as loader:
                for b in loader:
                    s.train_step(**b.arrays)

        Per array (dicts by name; names not in `arrays` are an error):
          dtypes: the batches' dtype, np.float32, np.int32 or np.int64 (default: float32 for
            float and bool data, int32 for int32 data, int64 for other integers);
          normalize: "none" (default), "compute" (a mean and population std per channel, the
            first per-sample dim, from the samples), "global" (one for the whole array) or
            (mean, std) (numbers or per-channel lists); float32 arrays only;
          n_classes: every value must lie in [0, n_classes) (integer arrays).
        The loader options are Loader's that apply to every array: batch_size, producers, slots,
        seed, shuffle, last, pad_label, epochs, limit, shard_count, shard_index. An ndarray is
        written to a temporary .npy file that the loader reads at creation and that is removed
        then (give a file name for data that is large, to skip the copy)."""
        if not isinstance(arrays, dict) or not arrays:
            raise ArgumentTypeError(
                f"Loader.arrays: a dict {{name: ndarray or .npy file}} expected, {arrays!r} given"
            )
        per = {"dtypes": dtypes or {}, "normalize": normalize or {}, "n_classes": n_classes or {}}
        for what, d in per.items():
            if not isinstance(d, dict):
                raise ArgumentTypeError(
                    f"Loader.arrays: {what}: a dict by input name expected, {d!r} given"
                )
            for k in d:
                if k not in arrays:
                    raise ArgumentError(
                        f"Loader.arrays: {what}: '{k}' is not one of the arrays "
                        f"({', '.join(arrays)})"
                    )
        lib = _load_lib()
        o, _ = _loader_options(lib, opts)
        keep = []  # what the C structs borrow during create
        specs = (_LoaderArray * len(arrays))()
        with tempfile.TemporaryDirectory(prefix="dlcc-loader-") as tmp:
            for i, (name, src) in enumerate(arrays.items()):
                if not isinstance(name, str) or not name:
                    raise ArgumentTypeError(f"Loader.arrays: names are strings, {name!r} given")
                a = specs[i]
                lib.dlrt_loader_array_init(ctypes.byref(a))
                if isinstance(src, np.ndarray):
                    path = os.path.join(tmp, f"{i}.npy")
                    np.save(path, np.ascontiguousarray(src))
                    kind_dtype = src.dtype
                else:
                    path = os.fsdecode(_path_arg(f"Loader.arrays: '{name}'", src))
                    try:
                        kind_dtype = np.load(path, mmap_mode="r").dtype
                    except Exception:  # the runtime reads it and says what is wrong
                        kind_dtype = np.dtype(np.float32)
                want = per["dtypes"].get(name)
                if want is None:
                    want = (np.int32 if kind_dtype == np.int32 else np.int64) \
                        if kind_dtype.kind in "iu" else np.float32
                try:
                    want = np.dtype(want)
                except TypeError:
                    want = None
                codes = {np.dtype(np.float32): 0, np.dtype(np.int32): 3, np.dtype(np.int64): 4}
                if want not in codes:
                    raise ArgumentError(
                        f"Loader.arrays: dtypes: '{name}': np.float32, np.int32 or np.int64 "
                        f"expected, {per['dtypes'].get(name)!r} given"
                    )
                a.dtype = codes[want]
                bname, bpath = name.encode(), os.fsencode(path)
                keep += [bname, bpath]
                a.name, a.path = bname, bpath
                if name in per["n_classes"]:
                    a.n_classes = _int_option(f"n_classes '{name}'", per["n_classes"][name],
                                              *_C_INT64)
                norm = per["normalize"].get(name, "none")
                if isinstance(norm, str) and norm in ("none", "compute", "global"):
                    a.norm = _NORM_NONE if norm == "none" else _NORM_COMPUTE
                    a.per_channel = 1 if norm == "compute" else 0
                elif isinstance(norm, (tuple, list)) and len(norm) == 2:
                    mean = _norm_values("mean", norm[0])
                    std = _norm_values("std", norm[1])
                    if len(mean) != len(std):
                        raise ArgumentError(
                            f"Loader.arrays: normalize: '{name}': mean and std need the same "
                            f"number of values; {len(mean)} and {len(std)} given"
                        )
                    cm = (ctypes.c_float * len(mean))(*mean)
                    cs = (ctypes.c_float * len(std))(*std)
                    keep += [cm, cs]
                    a.norm, a.n_norm = _NORM_GIVEN, len(mean)
                    a.mean = ctypes.cast(cm, ctypes.POINTER(ctypes.c_float))
                    a.std = ctypes.cast(cs, ctypes.POINTER(ctypes.c_float))
                else:
                    raise ArgumentError(
                        f"Loader.arrays: normalize: '{name}': 'none', 'compute', 'global' or "
                        f"(mean, std) expected, {norm!r} given"
                    )
            h = ctypes.c_void_p()
            _check(
                lib.dlrt_loader_create_arrays(specs, len(arrays), ctypes.byref(o), ctypes.byref(h)),
                f"data loader over {', '.join(arrays)}",
            )
        return cls(_LoaderHandle(lib, h), int(o.batch_size), None)

    def _live(self):
        if self._handle is None:
            raise ArgumentError("the loader is closed")
        return self._handle

    @property
    def label_dtype(self):
        """np.int64 or np.int32 (the `label_dtype` option): the dtype of every batch's y."""
        return self._label_dtype

    def next(self):
        """Borrows the next batch (waiting for the producers if needed) and returns a Batch, or
        None after the last batch when the loader was made with epochs > 0. The caller releases
        it. Raises Error when the slot it needs is still held by a batch not yet released (after
        `slots` batches held) or when a producer failed."""
        handle = self._live()
        cb = _LoaderBatch()
        _check(handle.lib.dlrt_loader_next(handle.h, ctypes.byref(cb)), "data loader: next")
        if not cb.x:
            return None
        slot = _Slot(handle, cb)
        B = self.batch_size
        if self.arrays_info:
            views = {}
            for i, ai in enumerate(self.arrays_info):
                ptr, nbytes = ctypes.c_void_p(), ctypes.c_size_t()
                _check(
                    handle.lib.dlrt_loader_batch_array(
                        handle.h, ctypes.byref(cb), i, ctypes.byref(ptr), ctypes.byref(nbytes)
                    ),
                    f"data loader: array '{ai.name}'",
                )
                views[ai.name] = _slot_view(slot, ptr.value, ai.dtype, (B,) + ai.sample_dims)
            return Batch(slot, None, None, cb, views)
        x = _slot_view(slot, cb.x, np.float32, (B,) + self.info.sample_dims)
        yptr = cb.y or cb.y_i32
        y = _slot_view(slot, yptr, self._label_dtype, (B,)) if yptr else None
        return Batch(slot, x, y, cb)

    def __iter__(self):
        """Yields batches until the end (endless with epochs=0), releasing each batch when the
        next is taken and the last one when the loop ends or is left."""
        b = None
        try:
            while True:
                if b is not None:
                    b.release()
                b = self.next()
                if b is None:
                    return
                yield b
        finally:
            if b is not None:
                b.release()

    @property
    def stats(self):
        """LoaderStats: how long next() waited so far."""
        handle = self._live()
        st = _LoaderStats()
        handle.lib.dlrt_loader_stats_get(handle.h, ctypes.byref(st))
        return LoaderStats(
            int(st.batches), float(st.first_wait_ms), float(st.mean_wait_ms),
            float(st.max_wait_ms)
        )

    def sample_index(self, epoch, pos):
        """The data-set index of the sample at position `pos` of epoch `epoch`'s order (row j of
        batch b holds position b * batch_size + j), without producing it."""
        handle = self._live()
        out = ctypes.c_int64()
        _check(
            handle.lib.dlrt_loader_sample_index(
                handle.h,
                _int_option("epoch", epoch, *_C_INT64),
                _int_option("pos", pos, *_C_INT64),
                ctypes.byref(out),
            ),
            "data loader: sample_index",
        )
        return int(out.value)

    def close(self):
        """Closes the loader (idempotent): next() raises from now on. The producers are stopped
        and the slots freed once no batch of it and no view of one is alive."""
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        i = self.info
        if self.arrays_info:
            shapes = ", ".join(f"{a.name}{list(a.sample_dims)}" for a in self.arrays_info)
            return (
                f"<dlcc.Loader {i.n_samples} samples of {shapes}, "
                f"{i.batches_per_epoch} batches of {self.batch_size} per epoch>"
            )
        return (
            f"<dlcc.Loader {i.n_samples} samples of {list(i.sample_dims)}, "
            f"{i.batches_per_epoch} batches of {self.batch_size} per epoch>"
        )
