#!/usr/bin/python3
"""bench/compare.py — the driver behind bench/compare.sh: issue 17's table of dlcc against
PyTorch (eager, torch 1.13), ONNX Runtime (npm onnxruntime-node) and OpenBLAS.

    compare.py --build BUILD --work DIR [--cache DIR] [--ort DIR] [--quick] [--rounds R] [--ftz]
    compare.py --torch-worker WORK          (internal: the PyTorch side, tasks on stdin)

What it does, in one process tree (compare.sh -> this script -> its workers):
  1. Compiles every model of bench/models/ it needs with `BUILD/dlcc compile` (through the cache
     --cache, never the user's), the inference models without their train block, loss and label
     input (infer_variant), and one `c = MatMul/Gemm (a, b)` per GEMM shape.
  2. Parity, before any timing: for each train model, PyTorch's initial params (torch.manual_seed
     fixed, default init) are written as safetensors in dlcc's names and layouts (Linear weights
     transposed: dlcc's are [in, out]); the Python binding loads them into a session
     (Session.load) and both systems run PARITY_STEPS steps on the same batches. Losses and
     final params are compared with tests/parity/parity.py's gate: within 1e-4 of float32
     PyTorch (relative, per step / per tensor) where PyTorch's own float32 error is small, else
     within 8x that error of float64 PyTorch (its error measured as float32 vs float64 and a
     batch with its samples permuted). A model that fails is reported and NOT timed. Inference
     models check dlcc's logits against PyTorch's forward (1e-4).
  3. Timing, ROUNDS rounds (median reported); in each round every case runs on each system in
     turn, the order rotating from round to round. Each measurement starts from the same params
     (the init file) and steps through a pool of distinct random batches, so nothing is
     memorised. dlcc: bench/step_bench.c (libdlrt, wall time of STEPS steps after a warm-up);
     PyTorch: a worker process (this script, --torch-worker) with torch.set_num_threads(T) and
     its BLAS pool (Debian's OpenBLAS, which torch's setting does not reach) at T threads,
     zero_grad(set_to_none) + forward + backward + step, inference under torch.inference_mode();
     ONNX Runtime: bench/ort_bench.js (a node worker) on models exported from the same PyTorch
     modules with torch.onnx.export (static shapes); OpenBLAS: bench/gemm_bench.c.
     At 2 threads every other system gets the best of its 1- and 2-thread times (the issue
     measures PyTorch so; ONNX Runtime's and OpenBLAS's thread pools also lose on small work,
     and a user would run those with one thread): dlcc alone must use its second thread well.
  4. Prints the issue's table (ratio = their time / dlcc's time; > 1: dlcc is faster) and the
     details: times, GFLOP/s of dlcc and % of the FMA peak measured by bench/fma_peak.c; writes
     every round's times to BUILD/compare-times.json.

FLOP counts (per step): forward products (GEMM / conv / attention matmuls), plus for training
the weight gradients of every product and the input gradients of every product but the first
(whose input needs none); elementwise work is not counted.
"""

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MODELS = os.path.join(HERE, "models")
sys.path.insert(0, os.path.join(REPO, "tests", "parity"))
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from parity import TRAIN_RE, Gate, rel_scalar, rel_tensor, st_write  # noqa: E402

PARITY_STEPS = 5

# ---------------------------------------------------------------------------------------------
# The models: the .dlg file, its batch dim, the PyTorch module, and how params map between them
# (dlcc name, module attribute path, transposed).


def mlp_module(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def mlp_map(sizes):
    return [(f"{k}{i + 1}", f"{2 * i}.{a}", k == "w")
            for i in range(len(sizes) - 1) for k, a in (("w", "weight"), ("b", "bias"))]


def mlp_flops(sizes, batch, train):
    prods = [2 * batch * sizes[i] * sizes[i + 1] for i in range(len(sizes) - 1)]
    return sum(prods) + (sum(prods) + sum(prods[1:]) if train else 0)


def cnn_module():
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


CNN_MAP = [("k1", "0.weight", False), ("c1", "0.bias", False), ("k2", "3.weight", False),
           ("c2", "3.bias", False), ("w3", "7.weight", True), ("b3", "7.bias", False),
           ("w4", "9.weight", True), ("b4", "9.bias", False)]


def cnn_flops(batch, train):
    prods = [2 * batch * 32 * 28 * 28 * 1 * 9, 2 * batch * 64 * 14 * 14 * 32 * 9,
             2 * batch * 3136 * 128, 2 * batch * 128 * 10]
    return sum(prods) + (sum(prods) + sum(prods[1:]) if train else 0)


def transformer_module():
    return nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0,
                                      activation="gelu", batch_first=True)


TRANSFORMER_MAP = [("w_qkv", "self_attn.in_proj_weight", True), ("b_qkv", "self_attn.in_proj_bias", False),
                   ("w_o", "self_attn.out_proj.weight", True), ("b_o", "self_attn.out_proj.bias", False),
                   ("g1", "norm1.weight", False), ("be1", "norm1.bias", False),
                   ("w1", "linear1.weight", True), ("b1", "linear1.bias", False),
                   ("w2", "linear2.weight", True), ("b2", "linear2.bias", False),
                   ("g2", "norm2.weight", False), ("be2", "norm2.bias", False)]


def transformer_flops(batch, train):
    tok = batch * 128
    qkv, rest = 2 * tok * 256 * 768, 2 * tok * 256 * 256 + 2 * 2 * tok * 256 * 1024
    att = batch * 4 * 2 * (2 * 128 * 128 * 64)
    fwd = qkv + rest + att
    return fwd + (qkv + 2 * rest + 2 * att if train else 0)


def ce_loss(out, y):
    return F.cross_entropy(out, y)


def mse_loss(out, target):
    return F.mse_loss(out, target)


def sgd(lr, momentum=0.0):
    return lambda ps: torch.optim.SGD(ps, lr=lr, momentum=momentum)


def adam(lr):
    return lambda ps: torch.optim.Adam(ps, lr=lr)


# name -> spec. x: input name and per-sample shape; y: ("labels", classes) or ("target", shape).
SPECS = {
    "mlp_512_sgd": dict(make=lambda: mlp_module([784, 512, 512, 10]), map=mlp_map([784, 512, 512, 10]),
                        dim="N", x=[784], y=("labels", 10), loss=ce_loss, opt=sgd(0.01, 0.9),
                        flops=lambda b, t: mlp_flops([784, 512, 512, 10], b, t)),
    "mlp_512_adam": dict(make=lambda: mlp_module([784, 512, 512, 10]), map=mlp_map([784, 512, 512, 10]),
                         dim="N", x=[784], y=("labels", 10), loss=ce_loss, opt=adam(1e-3),
                         flops=lambda b, t: mlp_flops([784, 512, 512, 10], b, t)),
    "mlp_1024_adam": dict(make=lambda: mlp_module([784, 1024, 1024, 1024, 10]),
                          map=mlp_map([784, 1024, 1024, 1024, 10]), dim="N", x=[784], y=("labels", 10),
                          loss=ce_loss, opt=adam(1e-3),
                          flops=lambda b, t: mlp_flops([784, 1024, 1024, 1024, 10], b, t)),
    "cnn": dict(make=cnn_module, map=CNN_MAP, dim="N", x=[1, 28, 28], y=("labels", 10), loss=ce_loss,
                opt=sgd(0.01), flops=cnn_flops),
    "transformer": dict(make=transformer_module, map=TRANSFORMER_MAP, dim="B", x=[128, 256],
                        y=("target", [128, 256]), loss=mse_loss, opt=adam(1e-4), flops=transformer_flops),
    "mlp_small_adam": dict(make=lambda: mlp_module([64, 256, 256, 8]), map=mlp_map([64, 256, 256, 8]),
                           dim="N", x=[64], y=("labels", 8), loss=ce_loss, opt=adam(1e-3),
                           flops=lambda b, t: mlp_flops([64, 256, 256, 8], b, t)),
}

# (table label, model, batch, timed steps)
TRAIN_CASES = [
    ("train step, MLP 784-512-512-10 b128 SGD-momentum", "mlp_512_sgd", 128, 150),
    ("train step, same, Adam", "mlp_512_adam", 128, 150),
    ("train step, MLP 784-1024-1024-1024-10 b256 Adam", "mlp_1024_adam", 256, 30),
    ("train step, CNN b64 SGD", "cnn", 64, 40),
    ("train step, transformer block b8 Adam", "transformer", 8, 12),
    ("train step, MLP 64-256-256-8 b32 Adam", "mlp_small_adam", 32, 2000),
]
# (label, model, {batch: timed calls})
INFER_CASES = [("MLP 784-1024x3-10", "mlp_1024_adam", {1: 2000, 256: 40}),
               ("CNN", "cnn", {1: 1000, 256: 10})]
# (label, M, N, K, transA, transB): C[M, N] = op(A) op(B), K the inner dimension.
GEMM_SQUARE = [32, 64, 128, 256, 1024, 2048]
GEMM_THIN = [("128x512x10 dX", 128, 512, 10, 0, 1), ("10x512x128 dW", 10, 512, 128, 1, 0)]


def infer_variant(text):
    """The model without its train block, loss and label input: the inference model (an
    artifact's infer entry reads every input of the forward graph, labels included)."""
    text = TRAIN_RE.sub("", text)
    text = re.sub(r"^loss\s*=.*\n", "", text, flags=re.M)
    return re.sub(r"^input\s+(y|target)\s*:.*\n", "", text, flags=re.M)


def get_attr(mod, path):
    for p in path.split("."):
        mod = getattr(mod, p)
    return mod


def to_dlcc(module, mapping):
    out = {}
    for name, path, tr in mapping:
        a = get_attr(module, path).detach().double().numpy()
        out[name] = (a.T if tr else a).astype(np.float32)
    return out


def load_into(module, mapping, params):
    with torch.no_grad():
        for name, path, tr in mapping:
            p = get_attr(module, path)
            a = params[name].T if tr else params[name]
            p.copy_(torch.from_numpy(np.ascontiguousarray(a)).to(p.dtype))


def make_batches(spec, batch, n, seed):
    rs = np.random.RandomState(seed)
    x = rs.standard_normal([n, batch] + spec["x"]).astype(np.float32)
    kind, arg = spec["y"]
    if kind == "labels":
        y = rs.randint(0, arg, size=[n, batch]).astype(np.int64)
    else:
        y = rs.standard_normal([n, batch] + arg).astype(np.float32)
    return x, y


def input_names(spec):
    return "x", "y" if spec["y"][0] == "labels" else "target"


# ---------------------------------------------------------------------------------------------
# The PyTorch side (also used in-process by parity).

def torch_train(spec, params, xs, ys, steps, dtype=torch.float32):
    torch.manual_seed(0)
    module = spec["make"]().to(dtype)
    load_into(module, spec["map"], params)
    module.train()
    opt = spec["opt"](list(module.parameters()))
    losses = []
    for i in range(steps):
        x = torch.from_numpy(xs[i % len(xs)]).to(dtype)
        y = torch.from_numpy(ys[i % len(ys)])
        y = y.to(dtype) if y.is_floating_point() else y
        opt.zero_grad(set_to_none=True)
        loss = spec["loss"](module(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return module, losses



def set_blas_threads(n):
    """Debian's PyTorch runs its matrix products in the system BLAS (OpenBLAS, pthreads build),
    whose thread pool torch.set_num_threads does not control: at "1 thread" its GEMMs ran on both
    cores (measured: process CPU time 1.98x wall time for a 1024^3 matmul), and at 2 threads the
    two pools oversubscribed the cores. Sets OpenBLAS's pool to n threads when the library is
    OpenBLAS; returns whether it could."""
    import ctypes
    for name in ("libblas.so.3", "libopenblas.so.0"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        if hasattr(lib, "openblas_set_num_threads"):
            lib.openblas_set_num_threads(int(n))
            return True
    return False

def torch_worker(work):
    """Times PyTorch tasks read as JSON lines from stdin; answers one JSON line each."""
    from parity import st_read
    for line in sys.stdin:
        if not line.strip():
            continue
        t = json.loads(line)
        try:
            spec = SPECS[t["model"]]
            params, _ = st_read(t["init"])
            torch.set_num_threads(t["threads"])
            set_blas_threads(t["threads"])
            torch.set_flush_denormal(bool(t.get("ftz")))
            xs = np.load(t["x"])
            if t["kind"] == "train":
                ys = np.load(t["y"])
                torch.manual_seed(0)
                module = spec["make"]()
                load_into(module, spec["map"], params)
                opt = spec["opt"](list(module.parameters()))
                xt = [torch.from_numpy(a) for a in xs]
                yt = [torch.from_numpy(a) for a in ys]
                n = len(xt)
                for i in range(t["warmup"]):
                    opt.zero_grad(set_to_none=True)
                    spec["loss"](module(xt[i % n]), yt[i % n]).backward()
                    opt.step()
                t0 = time.perf_counter()
                for i in range(t["warmup"], t["warmup"] + t["steps"]):
                    opt.zero_grad(set_to_none=True)
                    spec["loss"](module(xt[i % n]), yt[i % n]).backward()
                    opt.step()
                dt = time.perf_counter() - t0
            else:
                module = spec["make"]()
                load_into(module, spec["map"], params)
                module.eval()
                xt = [torch.from_numpy(a) for a in xs]
                n = len(xt)
                with torch.inference_mode():
                    for i in range(t["warmup"]):
                        module(xt[i % n])
                    t0 = time.perf_counter()
                    for i in range(t["warmup"], t["warmup"] + t["steps"]):
                        module(xt[i % n])
                    dt = time.perf_counter() - t0
            ans = {"ms_per_step": 1e3 * dt / t["steps"]}
        except Exception as e:  # reported in the table, not a crash of the whole benchmark
            ans = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(ans) + "\n")
        sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# The orchestrator.

class Worker:
    """A persistent worker process answering one JSON line per JSON task line."""

    def __init__(self, cmd, env=None):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def ask(self, task):
        self.p.stdin.write(json.dumps(task) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            return {"error": "the worker exited"}
        return json.loads(line)

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def sh(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {(r.stderr or r.stdout).strip()[:600]}")
    return r.stdout


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        if m:
            return m.group(1).strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch-worker", metavar="WORK")
    ap.add_argument("--build")
    ap.add_argument("--work")
    ap.add_argument("--cache", help="the compilation cache to use (default: WORK/cache)")
    ap.add_argument("--ort", help="the onnxruntime-node package directory (omit: no ONNX Runtime rows)")
    ap.add_argument("--quick", action="store_true", help="1 round, few steps: a smoke test")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--openblas-note", default="core as detected",
                    help="how compare.sh chose OpenBLAS's kernels (printed in the header)")
    ap.add_argument("--ftz", action="store_true", help="flush denormals to zero in every system")
    args = ap.parse_args()
    if args.torch_worker:
        torch_worker(args.torch_worker)
        return 0
    rounds = args.rounds or (1 if args.quick else 5)
    scale = 0.1 if args.quick else 1.0
    build, work = os.path.abspath(args.build), os.path.abspath(args.work)
    dlcc_exe = os.path.join(build, "dlcc")
    env = dict(os.environ, DLCC_CACHE_DIR=os.path.abspath(args.cache or os.path.join(work, "cache")),
               DLCC_BUILD_DIR=build)
    os.environ.update(DLCC_CACHE_DIR=env["DLCC_CACHE_DIR"], DLCC_BUILD_DIR=build)
    import dlcc  # noqa: E402 (after DLCC_BUILD_DIR is set)
    t_start = time.monotonic()
    print(f"cpu: {cpu_name()}, {os.cpu_count()} logical CPUs; load average {loadavg()}")
    ort_version = "not installed: no ONNX Runtime rows"
    if args.ort:
        with open(os.path.join(args.ort, "package.json")) as f:
            ort_version = "npm onnxruntime-node " + json.load(f)["version"]
    print(f"PyTorch {torch.__version__} (eager), OpenBLAS (Debian libopenblas, {args.openblas_note}), "
          f"ONNX Runtime: {ort_version}")
    peak = {}

    def measure_peak():
        """bench/fma_peak.c's GFLOP/s at 1 and 2 threads (kept: the best seen)."""
        for line in sh([os.path.join(work, "fma_peak"), "1", "2"]).splitlines():
            m = re.match(r"isa (\S+) threads (\d+) gflops (\S+)", line)
            t = int(m.group(2))
            peak[t] = max(peak.get(t, 0.0), float(m.group(3)))
            peak["isa"] = m.group(1)
        return f"{peak[1]:.1f} GFLOP/s on 1 thread, {peak[2]:.1f} on 2"
    print(f"FMA peak ({measure_peak()}; {peak['isa']}, measured again at the end, the best kept)")
    sys.stdout.flush()

    # 1. Artifacts.
    def compile_model(name, dims, out):
        if not os.path.exists(out):
            cmd = [dlcc_exe, "compile", model_path(name), "-o", out]
            for k, v in dims.items():
                cmd += ["-D", f"{k}={v}"]
            sh(cmd, env)
        return out

    def model_path(name):
        if name.endswith("-infer"):
            path = os.path.join(work, name + ".dlg")
            with open(os.path.join(MODELS, name[:-6] + ".dlg")) as f:
                text = infer_variant(f.read())
            with open(path, "w") as f:
                f.write(text)
            return path
        return os.path.join(MODELS, name + ".dlg")

    arts = {}
    for _, model, batch, _ in TRAIN_CASES:
        spec = SPECS[model]
        arts[(model, batch)] = compile_model(model, {spec["dim"]: batch}, os.path.join(work, f"{model}-{batch}.so"))
    for _, model, batches in INFER_CASES:
        for b in batches:
            spec = SPECS[model]
            arts[(model + "-infer", b)] = compile_model(model + "-infer", {spec["dim"]: b},
                                                        os.path.join(work, f"{model}-infer-{b}.so"))
    gemms = [(f"square {n}", n, n, n, 0, 0) for n in GEMM_SQUARE] + GEMM_THIN
    for label, m_, n_, k_, ta, tb in gemms:
        path = os.path.join(work, f"gemm-{m_}x{n_}x{k_}-{ta}{tb}.dlg")
        a_shape = f"{k_}, {m_}" if ta else f"{m_}, {k_}"
        b_shape = f"{n_}, {k_}" if tb else f"{k_}, {n_}"
        op = f"Gemm <transA = {ta}, transB = {tb}>" if ta or tb else "MatMul"
        with open(path, "w") as f:
            f.write(f"model gemm\ninput a : float[{a_shape}]\ninput b : float[{b_shape}]\n"
                    f"c = {op} (a, b)\noutput c\n")
        so = path[:-4] + ".so"
        if not os.path.exists(so):
            sh([dlcc_exe, "compile", path, "-o", so], env)
        arts[("gemm", label)] = so
    print(f"compiled {len(arts)} artifacts ({time.monotonic() - t_start:.0f} s)")
    sys.stdout.flush()

    # 2. Initial params, batch pools, parity.
    inits, pools, failed = {}, {}, {}
    models = sorted({c[1] for c in TRAIN_CASES} | {c[1] for c in INFER_CASES})
    for i, model in enumerate(models):
        spec = SPECS[model]
        torch.manual_seed(1000 + i)
        module = spec["make"]()
        inits[model] = to_dlcc(module, spec["map"])
        st_write(os.path.join(work, f"{model}.init.safetensors"), inits[model])

    def pool(model, batch, n_steps):
        key = (model, batch)
        if key not in pools:
            spec = SPECS[model]
            per = 4 * batch * int(np.prod(spec["x"]))
            n = int(max(2, min(n_steps, (32 << 20) // per)))
            xs, ys = make_batches(spec, batch, n, 7 + batch)
            px, py = os.path.join(work, f"{model}-{batch}.x.npy"), os.path.join(work, f"{model}-{batch}.y.npy")
            np.save(px, xs)
            np.save(py, ys)
            pools[key] = (px, py)
        return pools[key]

    print("parity (dlcc through the Python binding vs PyTorch, same params and batches):")
    torch.set_num_threads(1)
    for _, model, batch, _ in TRAIN_CASES:
        spec = SPECS[model]
        steps = PARITY_STEPS
        xs, ys = make_batches(spec, batch, steps, 99)
        init = inits[model]
        m32, l32 = torch_train(spec, init, xs, ys, steps)
        m64, l64 = torch_train(spec, init, xs, ys, steps, dtype=torch.float64)
        perm = np.random.RandomState(5).permutation(batch)
        mp, lp = torch_train(spec, init, xs[:, perm], ys[:, perm], steps)
        p32, p64, pp = (to_dlcc(m, spec["map"]) for m in (m32, m64, mp))
        s = dlcc.compile(os.path.join(MODELS, model + ".dlg"), dims={spec["dim"]: batch}).session(threads=1)
        s.load(os.path.join(work, f"{model}.init.safetensors"))
        xn, yn = input_names(spec)
        dl = [s.train_step(**{xn: xs[i], yn: ys[i]}).loss for i in range(steps)]
        g = Gate()
        for i in range(steps):
            noise = max(rel_scalar(l32[i], l64[i]), rel_scalar(lp[i], l64[i]))
            g.check("loss", f"step {i + 1} loss (dlcc {dl[i]:.9g}, torch {l32[i]:.9g})",
                    rel_scalar(dl[i], l32[i]), rel_scalar(dl[i], l64[i]), noise, i == 0)
        for k in p32:
            got = s.params[k]
            noise = max(rel_tensor(p32[k], p64[k], 1e-6), rel_tensor(pp[k], p64[k], 1e-6))
            g.check("param", f"param {k}", rel_tensor(got, p32[k], 1e-6), rel_tensor(got, p64[k], 1e-6),
                    noise, False)
        s.close()
        ok = not g.problems
        if not ok:
            failed[model] = g.problems[0]
        print(f"  {'ok  ' if ok else 'FAIL'} {model:15s} b{batch:<4d} {steps} steps: largest loss rel err "
              f"{g.worst['loss']:.1e}, param rel err {g.worst['param']:.1e}"
              f"{'' if ok else '  -- ' + g.problems[0] + ' (not timed)'}")
    for label, model, batches in INFER_CASES:
        spec = SPECS[model]
        m = torch_train(spec, inits[model], *make_batches(spec, 2, 1, 3), 0)[0].eval()
        for b in batches:
            xs, _ = make_batches(spec, b, 1, 11)
            with torch.no_grad():
                want = m(torch.from_numpy(xs[0])).numpy()
            s = dlcc.compile(model_path(model + "-infer"), dims={spec["dim"]: b}).session(threads=1)
            s.load(os.path.join(work, f"{model}.init.safetensors"))
            got = s.infer(x=xs[0])["logits"]
            s.close()
            e = rel_tensor(got, want, 1e-6)
            ok = e <= 1e-4
            if not ok:
                failed[(model, b)] = f"logits rel err {e:.1e}"
            print(f"  {'ok  ' if ok else 'FAIL'} {model:15s} b{b:<4d} inference logits rel err {e:.1e}")
    sys.stdout.flush()

    # ONNX models for ONNX Runtime (static shapes, one per batch).
    onnx = {}
    if args.ort:
        for label, model, batches in INFER_CASES:
            spec = SPECS[model]
            m = torch_train(spec, inits[model], *make_batches(spec, 2, 1, 3), 0)[0].eval()
            for b in batches:
                path = os.path.join(work, f"{model}-{b}.onnx")
                if not os.path.exists(path):
                    torch.onnx.export(m, torch.zeros([b] + spec["x"]), path, input_names=["x"],
                                      output_names=["logits"], opset_version=13)
                onnx[(model, b)] = path

    # 3. Timing.
    n_ = lambda steps: max(3, int(steps * scale))  # noqa: E731
    warm = lambda steps: max(1, n_(steps) // 10)  # noqa: E731
    tasks = []  # (key, system, threads, runner)
    step_bench = os.path.join(work, "step_bench")
    gemm_bench = os.path.join(work, "gemm_bench")
    ftz = ["--ftz"] if args.ftz else []

    def dlcc_step(kind, model, batch, threads, steps):
        px, py = pool(model, batch, steps + warm(steps))
        xn, yn = input_names(SPECS[model])
        cmd = [step_bench, arts[(model if kind == "train" else model + "-infer", batch)], kind, str(threads), str(n_(steps)), str(warm(steps)),
               "--init", os.path.join(work, f"{model}.init.safetensors"), *ftz, f"{xn}={px}"]
        if kind == "train":
            cmd.append(f"{yn}={py}")

        def run():
            out = sh(cmd)
            m = re.search(r"ms_per_step (\S+) steps \d+ first_loss (\S+) last_loss (\S+)", out)
            if kind == "train" and not np.isfinite(float(m.group(3))):
                raise RuntimeError(f"non-finite loss {m.group(3)}")
            return float(m.group(1))
        return run

    def torch_step(kind, model, batch, threads, steps):
        px, py = pool(model, batch, steps + warm(steps))
        task = dict(kind=kind, model=model, threads=threads, steps=n_(steps), warmup=warm(steps), x=px, y=py,
                    init=os.path.join(work, f"{model}.init.safetensors"), ftz=args.ftz)
        return lambda: answer(workers["torch"].ask(task))

    def ort_step(model, batch, threads, steps):
        px, _ = pool(model, batch, steps + warm(steps))
        task = dict(onnx=onnx[(model, batch)], threads=threads, steps=n_(steps), warmup=warm(steps), input="x",
                    pool=px, shape=[batch] + SPECS[model]["x"], ftz=args.ftz)
        return lambda: answer(workers["ort"].ask(task))

    def answer(a):
        if "error" in a:
            raise RuntimeError(a["error"])
        return a["ms_per_step"]

    def gemm_step(side, label, m_, n_2, k_, ta, tb, threads):
        cmd = [gemm_bench, str(m_), str(n_2), str(k_), str(ta), str(tb), str(threads), side,
               arts[("gemm", label)], "5" if args.quick else "15"]
        return lambda: float(re.search(r"ms_per_call (\S+)", sh(cmd)).group(1))

    for label, model, batch, steps in TRAIN_CASES:
        if model in failed:
            continue
        for t in (1, 2):
            tasks.append(((label, t), [("dlcc", dlcc_step("train", model, batch, t, steps)),
                                       ("torch", torch_step("train", model, batch, t, steps))]))
    for label, model, batches in INFER_CASES:
        for b, steps in batches.items():
            if (model, b) in failed:
                continue
            for t in (1, 2):
                systems = [("dlcc", dlcc_step("infer", model, b, t, steps)),
                           ("torch", torch_step("infer", model, b, t, steps))]
                if args.ort:
                    systems.append(("ort", ort_step(model, b, t, steps)))
                tasks.append(((f"infer {label} b{b}", t), systems))
    for label, m_, n_2, k_, ta, tb in gemms:
        for t in (1, 2):
            tasks.append(((f"gemm {label}", t), [("dlcc", gemm_step("dlcc", label, m_, n_2, k_, ta, tb, t)),
                                                 ("openblas", gemm_step("openblas", label, m_, n_2, k_, ta, tb,
                                                                        t))]))
    workers = {"torch": Worker([sys.executable, os.path.abspath(__file__), "--torch-worker", work])}
    if args.ort:
        workers["ort"] = Worker(["node", os.path.join(HERE, "ort_bench.js"), args.ort])
    times, errors = {}, {}
    print(f"timing: {rounds} round(s) of {len(tasks)} cases, systems alternating "
          f"({time.monotonic() - t_start:.0f} s so far)")
    sys.stdout.flush()
    try:
        for r in range(rounds):
            for key, systems in tasks:
                order = systems[r % len(systems):] + systems[:r % len(systems)]
                for sysname, run in order:
                    try:
                        times.setdefault((key, sysname), []).append(run())
                    except Exception as e:  # noqa: BLE001 - reported below
                        errors[(key, sysname)] = str(e)[:300]
            print(f"  round {r + 1}/{rounds} done ({time.monotonic() - t_start:.0f} s, load average {loadavg()})")
            sys.stdout.flush()
    finally:
        for w in workers.values():
            w.close()

    print(f"FMA peak measured again: {measure_peak()} (best of both)")

    # 4. The table.
    def med(key, sysname):
        v = times.get((key, sysname))
        return statistics.median(v) if v else None

    def base(key, sysname):
        """The baseline's time; at 2 threads the best of its 1- and 2-thread times."""
        v = med(key, sysname)
        if key[1] == 2:
            v1 = med((key[0], 1), sysname)
            v = min(x for x in (v, v1) if x is not None) if (v or v1) else None
        return v

    def ratio(key, sysname):
        d, b = med(key, "dlcc"), base(key, sysname)
        return f"{b / d:.2f}" if d and b else "n/a"

    print()
    print(f"Ratio = their time / dlcc's time (> 1: dlcc is faster); medians of {rounds} alternating "
          f"round(s); at 2 threads their best of 1 and 2 threads.")
    print()
    print("| work | 1 thread | 2 threads |")
    print("|---|---|---|")
    for label, model, batch, _ in TRAIN_CASES:
        if model in failed:
            print(f"| {label} | not timed: parity failed | |")
            continue
        print(f"| {label} | {ratio((label, 1), 'torch')} | {ratio((label, 2), 'torch')} |")
    for sysname, sysl in (("ort", "ONNX Runtime"), ("torch", "PyTorch")):
        if sysname == "ort" and not args.ort:
            continue
        for label, model, batches in INFER_CASES:
            bs = list(batches)
            cells = [" / ".join(ratio((f"infer {label} b{b}", t), sysname) for b in bs) for t in (1, 2)]
            print(f"| inference vs {sysl}: {label} {' / '.join('b' + str(b) for b in bs)} | {cells[0]} | {cells[1]} |")
    for group, items in (("square " + " / ".join(str(n) for n in GEMM_SQUARE), [f"square {n}" for n in GEMM_SQUARE]),
                         ("thin: " + " / ".join(g[0] for g in GEMM_THIN), [g[0] for g in GEMM_THIN])):
        cells = [" / ".join(ratio((f"gemm {i}", t), "openblas") for i in items) for t in (1, 2)]
        print(f"| GEMM vs OpenBLAS, {group} | {cells[0]} | {cells[1]} |")

    print()
    print("Details: median ms per step / call at exactly that thread count; dlcc's GFLOP/s of the counted"
          " products and % of the measured FMA peak at that thread count:")
    print()
    print("| case | threads | dlcc ms | dlcc GFLOP/s | % peak | PyTorch ms | ORT ms | OpenBLAS ms | OpenBLAS GFLOP/s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")

    def fmt(v, f="{:.3f}"):
        return f.format(v) if v is not None else "-"

    rows = []
    for label, model, batch, _ in TRAIN_CASES:
        rows.append(((label, None), SPECS[model]["flops"](batch, True)))
    for label, model, batches in INFER_CASES:
        for b in batches:
            rows.append(((f"infer {label} b{b}", None), SPECS[model]["flops"](b, False)))
    for label, m_, n_2, k_, ta, tb in gemms:
        rows.append(((f"gemm {label}", None), 2.0 * m_ * n_2 * k_))
    for (name, _), flop in rows:
        for t in (1, 2):
            key = (name, t)
            d = med(key, "dlcc")
            g = flop / (d * 1e-3) * 1e-9 if d else None
            ob = med(key, "openblas")
            print(f"| {name} | {t} | {fmt(d)} | {fmt(g, '{:.1f}')} | {fmt(g / peak[t] * 100 if g else None, '{:.0f} %')}"
                  f" | {fmt(med(key, 'torch'))} | {fmt(med(key, 'ort'))} | {fmt(ob)}"
                  f" | {fmt(flop / (ob * 1e-3) * 1e-9 if ob else None, '{:.1f}')} |")
    if errors:
        print()
        for (key, sysname), e in sorted(errors.items()):
            print(f"error: {key[0]} at {key[1]} thread(s), {sysname}: {e}")
    raw = os.path.join(build, "compare-times.json")  # every round's times, to recheck the table
    with open(raw, "w") as f:
        json.dump({f"{k[0][0]} | {k[0][1]} threads | {k[1]}": v for k, v in times.items()}, f, indent=0)
    print()
    print(f"every round's times (ms): {raw}")
    print(f"total {time.monotonic() - t_start:.0f} s; load average at the end {loadavg()}")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
