#!/usr/bin/python3
"""PyTorch parity of dlcc's compiled training step.

Trains the MLP, CNN and transformer-block samples (samples/*.dlg) for STEPS steps with each
optimizer configuration below, once with `dlcc run --entry train_step` and once with a
functional PyTorch mirror of the same graph (float32, torch.optim with the same
hyper-parameters), from the same initial params (a safetensors file written here from a seeded
numpy RandomState) and the same batches (seeded normal inputs, scaled like normalised images,
and uniform random labels). Compares, per (sample, optimizer):

  * the loss at every step:   |loss_dlcc - loss_torch| / max(|loss_torch|, 1e-6)        <= 1e-4
  * the grad norm (pre-clip) at every step, by the same formula                          <= 1e-4
  * every final param tensor: max|p_dlcc - p_torch| / max(max|p_torch|, 1e-6)           <= 1e-4
  * every optimizer slot PyTorch keeps (momentum_buffer, exp_avg, exp_avg_sq,
    max_exp_avg_sq, square_avg, grad_avg), read from dlcc's --save-params file as
    "PARAM.SLOT":             max|s_dlcc - s_torch| / max(max|s_torch|, 1e-12)          <= 1e-4
    (a smaller floor than for params: second moments are legitimately tiny)

Each (sample, optimizer) runs from a cold start and from a warm checkpoint (see WARM_STEPS).

The gate is the case's own conditioning. Besides the float32 PyTorch run, every case is also
trained in float64 and in float32 on the same batches with their samples permuted (the loss is a
mean, so only the summation order changes): PyTorch's own float32 error for a quantity is
noise = max(|t32 - t64|, |t32perm - t64|), in the measures below. Then

  * the first step's loss and grad norm (one forward and backward, no update yet) and every
    quantity whose noise is under TOL / 5 (well-conditioned): |dlcc - t32| <= TOL, as strict as
    before;
  * every other quantity (ill-conditioned in float32 itself, e.g. adaptive optimizers from zero
    moments, whose first updates are a sign function of gradient elements within rounding of
    zero): |dlcc - t64| <= max(TOL, SAFETY * noise): dlcc may be no further from the exact
    (float64) answer than SAFETY times PyTorch's own float32 error. A different CPU (FMA
    contraction, AVX-512 vs AVX2 reduction trees) moves dlcc within that band, never out of it
    unless dlcc is wrong;
  * a quantity whose bound would exceed UNGATED (float32 training itself is chaotic there) is
    reported and counted, not gated: only the first step is held to TOL in such a case.

"Relative error" below always means the per-step (loss, grad norm) or per-tensor (params,
slots) quantity defined above; a tensor's error is normalised by its largest magnitude, not
element by element, so that elements that happen to sit near zero do not dominate.

The dlcc side (the CLI contract):
  dlcc run MODEL.dlg -D N=.. --entry train_step --steps K --init-params INIT.safetensors
           --in x=XS.npy --in y=YS.npy --save-params OUT.safetensors
with XS [K, ...input shape] (step i uses slice i), YS [K, batch] int64, printing one line
`step %d loss %.9g grad_norm %.9g skipped %d` per step. Variant models (each sample's `train`
block replaced by one configuration) and every other file live in a temporary directory, with
DLCC_CACHE_DIR pointing into it: one cache per variant (its cold and warm runs share it), so that
each case compiles its own model (--shared-cache: one cache for all). A forward check per sample
first compares the loss of the reference evaluator (`dlcc run --backend ref`, params read with
the `file(...)` initialiser) with the PyTorch mirror's, to tell a forward mismatch from a
training one.

Prints one line per (sample, optimizer) and a final
`parity: N passed, N failed, largest loss rel err E1, largest param rel err E2`.
Exits 1 on any failure, 77 when torch cannot be imported (ctest SKIP_RETURN_CODE), 2 on bad usage.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # pragma: no cover - depends on the machine
    print(f"parity: SKIP: cannot import torch ({e}); install python3-torch (tools/setup.sh)")
    sys.exit(77)

TOL = 1e-4
SAFETY = 8.0
UNGATED = 0.2
STEPS = 20
HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "samples"))

# ---------------------------------------------------------------------------------------------
# safetensors, by hand: u64 LE header length, JSON header, raw little-endian data.

_ST_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4",
              "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?", "BF16": "<u2"}


def st_write(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    off = 0
    blobs = []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def st_read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        dt = _ST_DTYPES[info["dtype"]]
        a = np.frombuffer(data[base + b:base + e], dtype=dt).reshape(info["shape"])
        if info["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.copy()
    return out, meta


# ---------------------------------------------------------------------------------------------
# The samples: what the .dlg text declares (dims, inputs, params, train block), read with
# regexes, plus a hand-written functional PyTorch forward over a dict of params named as in the
# .dlg (Gemm/MatMul weights are [in, out], so torch computes x @ w + b).

def parse_dlg(text, dims_override):
    dims = {m.group(1): int(m.group(2))
            for m in re.finditer(r"^\s*dim\s+(\w+)\s*=\s*(\d+)", text, re.M)}
    dims.update(dims_override)

    def shape(s):
        return [int(d) if d.strip().isdigit() else dims[d.strip()] for d in s.split(",") if d.strip()]

    inputs = [(m.group(1), m.group(2), shape(m.group(3)))
              for m in re.finditer(r"^\s*input\s+(\w+)\s*:\s*(\w+)\[([^\]]*)\]", text, re.M)]
    params = [(m.group(1), shape(m.group(2)))
              for m in re.finditer(r"^\s*param\s+(\w+)\s*:\s*float\[([^\]]*)\]", text, re.M)]
    return dims, inputs, params


TRAIN_RE = re.compile(r"^train\s+(\w+)\s*\{.*?\}", re.M | re.S)


def parse_train_block(text):
    m = TRAIN_RE.search(text)
    body = m.group(0)
    om = re.search(r"optimizer\s*=\s*(\w+)\s*(?:<([^>]*)>)?", body)
    attrs = {}
    for kv in (om.group(2) or "").split(","):
        if kv.strip():
            k, v = kv.split("=")
            attrs[k.strip()] = float(v)
    cm = re.search(r"clip_norm\s*=\s*([0-9.eE+-]+)", body)
    return om.group(1), attrs, float(cm.group(1)) if cm else None


def fwd_mlp(p, x, y, dims):
    h = x @ p["w1"] + p["b1"]
    a = torch.relu(h)
    logits = a @ p["w2"] + p["b2"]
    return F.cross_entropy(logits, y)


def fwd_cnn(p, img, lbl, dims):
    c = F.conv2d(img, p["k1"], p["c1"], padding=1)
    r = torch.relu(c)
    pool = F.max_pool2d(r, kernel_size=2, stride=2)
    f = torch.flatten(pool, 1)
    logits = f @ p["wf"] + p["bf"]
    return F.cross_entropy(logits, lbl)


def fwd_transformer(p, x, y, dims):
    B, T, C = dims["B"], dims["T"], dims["C"]
    scale = torch.tensor(0.17677669529663687, dtype=torch.float32)
    n1 = F.layer_norm(x, (C,), p["ln1_g"], p["ln1_b"], eps=1e-5)
    q = n1 @ p["wq"]
    k = n1 @ p["wk"]
    v = n1 @ p["wv"]
    s = q @ k.transpose(1, 2)
    att = torch.softmax(s * scale, dim=-1)
    ctx = att @ v
    r1 = x + ctx @ p["wo"]
    n2 = F.layer_norm(r1, (C,), p["ln2_g"], p["ln2_b"], eps=1e-5)
    flat = n2.reshape(-1, C)
    g = F.gelu(flat @ p["w_up"] + p["b_up"], approximate="tanh")
    dn = g @ p["w_dn"] + p["b_dn"]
    r2 = r1 + dn.reshape(B, T, C)
    pooled = r2.mean(dim=1)
    logits = pooled @ p["w_cls"] + p["b_cls"]
    return F.cross_entropy(logits, y)


# name -> (file, dim bindings for speed, forward, seed, input scale). The CNN's inputs are
# scaled down: with unit-spread noise images its 6272 pooled features make the first gradients
# (norm ~60) and lr 0.05 steps so large that training is chaotic and float32 rounding alone
# moves params by more than the tolerance (see the conditioning gate above).
SAMPLES = {
    "mlp": ("mlp_fmnist.dlg", {"N": 16}, fwd_mlp, 101, 1.0),
    "cnn": ("cnn_fmnist.dlg", {"N": 16}, fwd_cnn, 202, 0.1),
    "transformer": ("transformer_block.dlg", {"B": 4}, fwd_transformer, 303, 1.0),
}

# Optimizer configurations: (label, optimizer, attrs, clip_norm). None stands for the sample's
# own train block, used as written.
CONFIGS = [
    ("sgd", "sgd", {"lr": 0.05}, None),
    ("sgd-nesterov-wd", "sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": 1, "weight_decay": 0.0001}, None),
    ("sgd-momentum-dampening", "sgd", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1}, None),
    ("adam", "adam", {"lr": 0.001}, None),
    ("adam-wd", "adam", {"lr": 0.001, "weight_decay": 0.01}, None),
    ("adam-amsgrad-clip", "adam", {"lr": 0.001, "amsgrad": 1}, 0.5),
    ("adamw", "adamw", {"lr": 0.001, "weight_decay": 0.01}, None),
    ("rmsprop", "rmsprop", {"lr": 0.001}, None),
    ("rmsprop-momentum", "rmsprop", {"lr": 0.001, "momentum": 0.9}, None),
    ("rmsprop-centered-wd", "rmsprop", {"lr": 0.001, "centered": 1, "weight_decay": 0.001}, None),
    ("own", None, None, None),
]

# Every configuration runs from two starts: "cold" (the initial params, no optimizer state, step
# 0) and "warm" (a checkpoint after WARM_STEPS float64 steps on other batches: params, every
# optimizer slot and dlcc.step, loaded by --init-params; tests resuming mid-run, bias correction
# at step > 1 and SGD's momentum formula with an existing buffer).
WARM_STEPS = 3

# dlcc's defaults (ir/ir_ops.c dl_ir_optim_attr_specs), which mirror PyTorch's.
DEFAULTS = {
    "sgd": {"lr": 1e-3, "momentum": 0.0, "dampening": 0.0, "nesterov": 0, "weight_decay": 0.0},
    "adam": {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0, "amsgrad": 0},
    "adamw": {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 1e-2, "amsgrad": 0},
    "rmsprop": {"lr": 1e-2, "alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0, "momentum": 0.0, "centered": 0},
}


def fmt_num(v):
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def train_block_text(loss, opt, attrs, clip):
    a = ", ".join(f"{k} = {fmt_num(v)}" for k, v in attrs.items())
    s = f"train {loss} {{\n  optimizer = {opt} <{a}>\n"
    if clip is not None:
        s += f"  clip_norm = {clip!r}\n"
    return s + "}"


def make_optimizer(params, opt, attrs):
    a = dict(DEFAULTS[opt])
    unknown = set(attrs) - set(a)
    if unknown:
        raise ValueError(f"unknown {opt} attributes {sorted(unknown)}")
    a.update(attrs)
    common = {"lr": a["lr"], "weight_decay": a["weight_decay"], "foreach": False}
    if opt == "sgd":
        return torch.optim.SGD(params, momentum=a["momentum"], dampening=a["dampening"],
                               nesterov=bool(a["nesterov"]), **common)
    if opt in ("adam", "adamw"):
        cls = torch.optim.Adam if opt == "adam" else torch.optim.AdamW
        return cls(params, betas=(a["beta1"], a["beta2"]), eps=a["eps"],
                   amsgrad=bool(a["amsgrad"]), **common)
    return torch.optim.RMSprop(params, alpha=a["alpha"], eps=a["eps"], momentum=a["momentum"],
                               centered=bool(a["centered"]), **common)


# ---------------------------------------------------------------------------------------------
# Data: initial params and batches, deterministic per sample.

def make_init(params, seed):
    rs = np.random.RandomState(seed)
    out = {}
    for name, shp in params:
        if len(shp) == 4:  # conv kernel [out, in, kh, kw]: he normal
            fan_in = shp[1] * shp[2] * shp[3]
            a = rs.normal(0.0, np.sqrt(2.0 / fan_in), size=shp)
        elif len(shp) >= 2:  # [in, out]: glorot uniform
            lim = np.sqrt(6.0 / (shp[0] + shp[-1]))
            a = rs.uniform(-lim, lim, size=shp)
        elif name.endswith("_g"):  # LayerNorm gain: near one, not exactly
            a = 1.0 + 0.1 * rs.normal(size=shp)
        else:  # biases: small, non-zero, so that their paths are exercised from step one
            a = 0.05 * rs.normal(size=shp)
        out[name] = a.astype(np.float32)
    return out


def make_batches(inputs, steps, seed, x_scale):
    rs = np.random.RandomState(seed)
    (xn, _, xs), (yn, ydt, ys) = inputs
    assert ydt == "int64", ydt
    # Normalised images: zero mean, unit spread per pixel (random, not real images).
    x = (x_scale * rs.normal(0.0, 1.0, size=[steps] + xs)).astype(np.float32)
    y = rs.randint(0, 10, size=[steps] + ys).astype(np.int64)
    return (xn, x), (yn, y)


# ---------------------------------------------------------------------------------------------
# The PyTorch side. A start is (params, slots "PARAM.SLOT", step): cold (no slots, step 0) or a
# warm checkpoint.

def run_torch(fwd, dims, start, batches, opt, attrs, clip, steps, dtype=torch.float32):
    params0, slots0, step0 = start
    (_, xs), (_, ys) = batches
    order = list(params0)
    p = {k: torch.tensor(params0[k], dtype=dtype, requires_grad=True) for k in order}
    o = make_optimizer([p[k] for k in order], opt, attrs)
    if step0:
        for k in order:
            st = {s[len(k) + 1:]: torch.tensor(v, dtype=dtype) for s, v in slots0.items()
                  if s.startswith(k + ".")}
            if opt in ("adam", "adamw"):
                st["step"] = torch.tensor(float(step0))
            elif opt == "rmsprop":
                st["step"] = step0
            o.state[p[k]] = st
    losses, norms = [], []
    for i in range(steps):
        o.zero_grad(set_to_none=True)
        loss = fwd(p, torch.from_numpy(xs[i]).to(dtype), torch.from_numpy(ys[i]), dims)
        loss.backward()
        grads = [p[k].grad for k in order]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2) for g in grads]), 2)
        if clip is not None:
            torch.nn.utils.clip_grad_norm_([p[k] for k in order], clip)
        o.step()
        losses.append(float(loss.item()))
        norms.append(float(norm.item()))
    final = {k: p[k].detach().numpy().copy() for k in order}
    slots = {}
    for k in order:
        for sname, sv in o.state[p[k]].items():
            if sname != "step" and torch.is_tensor(sv):
                slots[f"{k}.{sname}"] = sv.detach().numpy().copy()
    return losses, norms, final, slots


def make_warm_start(fwd, dims, init, inputs, seed, x_scale, opt, attrs, clip):
    """WARM_STEPS steps from `init` on batches of their own, in float64, rounded to float32:
    a checkpoint with populated moments (and dlcc.step = WARM_STEPS)."""
    b = make_batches(inputs, WARM_STEPS, seed + 7, x_scale)
    _, _, final, slots = run_torch(fwd, dims, (init, {}, 0), b, opt, attrs, clip, WARM_STEPS,
                                   dtype=torch.float64)
    f32 = {k: v.astype(np.float32) for k, v in final.items()}
    return f32, {k: v.astype(np.float32) for k, v in slots.items()}, WARM_STEPS


STEP_RE = re.compile(r"^step\s+(\d+)\s+loss\s+(\S+)\s+grad_norm\s+(\S+)\s+skipped\s+(\d+)\s*$")


def run_dlcc(dlcc, model, dims, batches, init_path, out_path, steps, cache_dir, cpu=None, opt=None):
    (xn, xs_path), (yn, ys_path) = batches
    env = dict(os.environ, DLCC_CACHE_DIR=cache_dir)
    dflags = [a for k, v in dims.items() for a in ("-D", f"{k}={v}")]
    t0 = time.monotonic()
    if cpu or opt is not None:
        # A forced ISA level or LLVM optimisation level: compile the artifact so, then run it.
        so = f"{out_path}.{cpu or 'host'}.O{opt}.so"
        c = [dlcc, "compile", model, *dflags, "-o", so]
        c += ["--cpu", cpu] if cpu else []
        c += ["-O", str(opt)] if opt is not None else []
        r = subprocess.run(c, capture_output=True, text=True, env=env, timeout=300)
        if r.returncode != 0:
            return None, f"exit {r.returncode}: {(r.stderr or r.stdout).strip()[:800]}\n  cmd: {' '.join(c)}", 0.0
        model, dflags = so, []
    cmd = [dlcc, "run", model, *dflags]
    cmd += ["--entry", "train_step", "--steps", str(steps), "--init-params", init_path,
            "--in", f"{xn}={xs_path}", "--in", f"{yn}={ys_path}", "--save-params", out_path]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        return None, f"exit {r.returncode}: {(r.stderr or r.stdout).strip()[:800]}\n  cmd: {' '.join(cmd)}", dt
    rows = []
    for line in r.stdout.splitlines():
        m = STEP_RE.match(line.strip())
        if m:
            rows.append((float(m.group(2)), float(m.group(3)), int(m.group(4))))
    if len(rows) != steps:
        return None, f"expected {steps} step lines, got {len(rows)}: {r.stdout[:400]!r}", dt
    return rows, None, dt


def forward_variant(text, init_path):
    """The sample with every param read from INIT (the `file(...)` initialiser), no train block,
    and `loss` among the outputs: its infer entry on the reference evaluator gives the first
    step's loss, which tells a forward mismatch (the mirror or an op) from a training one."""
    t = re.sub(r"^(\s*param\s+(\w+)\s*:\s*[^=]*=).*$",
               lambda m: f'{m.group(1)} file({json.dumps(init_path)}, "{m.group(2)}")', text, flags=re.M)
    t = TRAIN_RE.sub("", t)
    if not re.search(r"^output\s+loss\s*$", t, re.M):
        t += "\noutput loss\n"
    return t


def run_dlcc_forward(dlcc, model, dims, x, y, out_path, cache_dir):
    (xn, xs_path), (yn, ys_path) = x, y
    cmd = [dlcc, "run", model, "--backend", "ref", "--in", f"{xn}={xs_path}", "--in", f"{yn}={ys_path}",
           "--out", f"loss={out_path}"]
    for k, v in dims.items():
        cmd += ["-D", f"{k}={v}"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, DLCC_CACHE_DIR=cache_dir),
                       timeout=300)
    if r.returncode != 0:
        return None, f"exit {r.returncode}: {(r.stderr or r.stdout).strip()[:800]}\n  cmd: {' '.join(cmd)}"
    return float(np.load(out_path)), None


def rel_scalar(a, b):
    return abs(a - b) / max(abs(b), 1e-6)


def rel_tensor(a, b, floor):
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    d = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
    return d / max(float(np.max(np.abs(b))), floor)


def permuted(batches, seed):
    """The same batches with each step's samples in another order (axis 1 of xs and ys)."""
    (xn, x), (yn, y) = batches
    rs = np.random.RandomState(seed)
    xp, yp = x.copy(), y.copy()
    for i in range(x.shape[0]):
        perm = rs.permutation(x.shape[1])
        xp[i], yp[i] = x[i][perm], y[i][perm]
    return (xn, xp), (yn, yp)


class Gate:
    """Per-quantity bound from PyTorch's own float32 error (see the module docstring)."""

    def __init__(self):
        self.problems = []
        self.worst = {"loss": 0.0, "grad_norm": 0.0, "param": 0.0, "slot": 0.0}
        self.ill = 0        # quantities gated by their conditioning instead of TOL
        self.ungated = 0    # quantities too chaotic in float32 to gate
        self.max_noise = 0.0

    def check(self, kind, what, e32, e64, noise, strict, detail=""):
        """e32/e64: dlcc's error against float32/float64 torch; noise: torch's own."""
        self.max_noise = max(self.max_noise, noise)
        if strict or noise <= TOL / 5:
            err, bound, against = e32, TOL, "torch f32"
        elif SAFETY * noise > UNGATED:
            self.ungated += 1
            return f"ungated (torch f32 noise {noise:.2e})"
        else:
            self.ill += 1
            err, bound, against = e64, max(TOL, SAFETY * noise), "torch f64"
        self.worst[kind] = max(self.worst[kind], err)
        if err > bound:
            self.problems.append(f"{what}: rel err {err:.2e} vs {against} > bound {bound:.2e}"
                                 f" (torch f32 noise {noise:.2e}){detail}")
        return f"rel {err:.2e} vs {against} (bound {bound:.2e})"


def compare(name, rows, got, meta, ref, r64, rperm, steps, verbose):
    """dlcc's step lines and checkpoint against the torch runs: a Gate with the problems."""
    g = Gate()
    losses, norms, final, slots = ref
    if r64 is None:  # strict everywhere: torch's own float32 noise taken as zero
        r64 = rperm = ref
    first_bad = None
    for i, (dl, dn, sk) in enumerate(rows):
        strict = i == 0
        for kind, d, t32, t64, tp in (("loss", dl, losses[i], r64[0][i], rperm[0][i]),
                                      ("grad_norm", dn, norms[i], r64[1][i], rperm[1][i])):
            noise = max(rel_scalar(t32, t64), rel_scalar(tp, t64))
            n_before = len(g.problems)
            msg = g.check(kind, f"step {i + 1} {kind} (dlcc {d:.9g}, torch {t32:.9g})",
                          rel_scalar(d, t32), rel_scalar(d, t64), noise, strict)
            if verbose:
                print(f"  {name} step {i + 1} {kind}: dlcc {d:.9g} torch {t32:.9g} {msg}")
            if len(g.problems) > n_before and first_bad is not None:
                g.problems.pop()  # report the first bad step only; later ones follow from it
            elif len(g.problems) > n_before:
                first_bad = i
        if sk != 0:
            g.problems.append(f"step {i + 1}: dlcc skipped the step (non-finite gradients)")
    for kind, want_all, w64, wp, floor in (("param", final, r64[2], rperm[2], 1e-6),
                                           ("slot", slots, r64[3], rperm[3], 1e-12)):
        for k, want in want_all.items():
            if k not in got:
                g.problems.append(f"{kind} {k} missing from the --save-params checkpoint")
                continue
            noise = max(rel_tensor(want, w64[k], floor), rel_tensor(wp[k], w64[k], floor))
            e32, e64 = rel_tensor(got[k], want, floor), rel_tensor(got[k], w64[k], floor)
            detail = ""
            if got[k].shape == want.shape:
                a, b = got[k].astype(np.float64), want.astype(np.float64)
                where = np.unravel_index(np.argmax(np.abs(a - b)), a.shape)
                detail = f" (largest at {tuple(int(i) for i in where)}: dlcc {a[where]:.9g} torch {b[where]:.9g})"
            else:
                detail = f" (shape {got[k].shape} vs {want.shape})"
            msg = g.check(kind, f"{kind} {k}", e32, e64, noise, False, detail)
            if verbose:
                print(f"  {name} {kind} {k}: {msg}")
    step_meta = meta.get("dlcc.step")
    if step_meta is not None and str(step_meta) != str(steps):
        g.problems.append(f"__metadata__ dlcc.step is {step_meta!r}, expected {steps}")
    return g


# What the host must have to run code compiled for an x86-64 ISA level (the psABI's levels, as
# /proc/cpuinfo names the flags). Any other --cpu name is taken as runnable.
ISA_LEVEL_FLAGS = {
    "x86-64-v2": ["sse4_2", "popcnt", "ssse3"],
    "x86-64-v3": ["avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe", "abm"],
    "x86-64-v4": ["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"],
}


def missing_cpu_features(cpu):
    need = []
    for level in ("x86-64-v2", "x86-64-v3", "x86-64-v4"):
        need += ISA_LEVEL_FLAGS[level]
        if level == cpu:
            break
    else:
        return []
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(next(l for l in f if l.startswith("flags")).split(":", 1)[1].split())
    except (OSError, StopIteration):
        return ["a readable /proc/cpuinfo"]
    return [n for n in need if n not in flags]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dlcc", required=True, help="path to the dlcc executable")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--only", action="append", default=[],
                    help="run only SAMPLE, SAMPLE/CONFIG or SAMPLE/CONFIG/START (repeatable)")
    ap.add_argument("--jobs", type=int, default=2, help="dlcc processes at once (default 2)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--torch-only", action="store_true",
                    help="run only the PyTorch side (no dlcc); with --conditioning, a design check")
    ap.add_argument("--conditioning", action="store_true",
                    help="also train in float64 with torch and print how far float32 torch is from it"
                         " (how well-conditioned each case is)")
    ap.add_argument("--shared-cache", action="store_true",
                    help="one compilation cache for all variants (by default each variant has its own,"
                         " so that a case never runs an artifact compiled from another variant)")
    ap.add_argument("--cpu", help="compile dlcc's side for this LLVM CPU (an ISA level such as x86-64-v3"
                                   " or x86-64-v4) instead of the host; exits 77 when the host cannot"
                                   " run that level's code")
    ap.add_argument("--opt", type=int, choices=range(4),
                    help="compile dlcc's side at this LLVM optimisation level (dlcc compile -O;"
                         " default: dlcc's, 3): the sanitizer build's 1, whose checks are of dlcc's"
                         " own code, the same at any level")
    ap.add_argument("-v", "--verbose", action="store_true", help="print per-step and per-tensor errors")
    args = ap.parse_args()
    if not args.torch_only and not os.access(args.dlcc, os.X_OK):
        print(f"parity: {args.dlcc}: not an executable", file=sys.stderr)
        return 2

    if args.cpu:
        missing = missing_cpu_features(args.cpu)
        if missing:
            print(f"parity: SKIP: this CPU lacks {', '.join(missing)}, needed to run {args.cpu} code")
            return 77
        # The AVX2 level on a host without AVX-512: the host's own run (parity_torch) already
        # trains with the AVX2 lowering (only LLVM's tuning for the CPU model differs), as
        # codegen_ops_v3 skips there too.
        no512 = missing_cpu_features("x86-64-v4")
        if args.cpu == "x86-64-v3" and no512:
            print(f"parity: SKIP: this CPU lacks {', '.join(no512)}: its own level is the AVX2"
                  " lowering, which parity_torch trains already")
            return 77
        print(f"parity: dlcc's side compiled for --cpu {args.cpu}")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)

    def selected(name, parent=False):
        # A case is selected by itself or an ancestor; a sample also by one of its cases.
        return not args.only or any(name == o or name.startswith(o + "/") or
                                    (parent and o.startswith(name + "/")) for o in args.only)

    tmp = tempfile.mkdtemp(prefix="dlcc-parity-")
    cache_dir = os.path.join(tmp, "cache")
    t_start = time.monotonic()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs))
    try:
        # Every dlcc run is submitted first so that the runs overlap the (single-threaded) torch
        # side; the results are then taken in order.
        work = []
        for sname, (fname, dims_bind, fwd, seed, x_scale) in SAMPLES.items():
            if not selected(sname, parent=True):
                continue
            text = open(os.path.join(SAMPLES_DIR, fname)).read()
            dims, inputs, params = parse_dlg(text, dims_bind)
            init = make_init(params, seed)
            batches = make_batches(inputs, args.steps, seed, x_scale)
            sdir = os.path.join(tmp, sname)
            os.makedirs(sdir)
            init_path = os.path.join(sdir, "init.safetensors")
            st_write(init_path, init)
            (xn, x), (yn, y) = batches
            xs_path, ys_path = os.path.join(sdir, "xs.npy"), os.path.join(sdir, "ys.npy")
            np.save(xs_path, x)
            np.save(ys_path, y)
            data = ((xn, xs_path), (yn, ys_path))
            if not args.torch_only and selected(f"{sname}/forward"):
                fpath = os.path.join(sdir, "forward.dlg")
                with open(fpath, "w") as f:
                    f.write(forward_variant(text, init_path))
                x0, y0 = os.path.join(sdir, "x0.npy"), os.path.join(sdir, "y0.npy")
                np.save(x0, x[0])
                np.save(y0, y[0])
                fut = pool.submit(run_dlcc_forward, args.dlcc, fpath, dims_bind, (xn, x0), (yn, y0),
                                  os.path.join(sdir, "forward.loss.npy"), cache_dir)
                work.append(dict(name=f"{sname}/forward", fut=fut, fwd=fwd, dims=dims, init=init,
                                 batches=batches, model=fpath))
            loss_name = TRAIN_RE.search(text).group(1)
            for label, opt, attrs, clip in CONFIGS:
                if opt is None:
                    opt, attrs, clip = parse_train_block(text)
                    vtext = text
                else:
                    vtext = TRAIN_RE.sub(lambda _m: train_block_text(loss_name, opt, attrs, clip), text,
                                         count=1)
                vpath = os.path.join(sdir, f"{label}.dlg")
                with open(vpath, "w") as f:
                    f.write(vtext)
                for start_kind in ("cold", "warm"):
                    name = f"{sname}/{label}/{start_kind}"
                    if not selected(name):
                        continue
                    if start_kind == "cold":
                        start, spath = (init, {}, 0), init_path
                    else:
                        start = make_warm_start(fwd, dims, init, inputs, seed, x_scale, opt, attrs, clip)
                        spath = os.path.join(sdir, f"{label}.warm.safetensors")
                        st_write(spath, {**start[0], **start[1]}, {"dlcc.step": str(start[2])})
                    out_path = os.path.join(sdir, f"{label}.{start_kind}.out.safetensors")
                    fut = None
                    if not args.torch_only:
                        vcache = cache_dir if args.shared_cache else os.path.join(cache_dir, sname, label)
                        fut = pool.submit(run_dlcc, args.dlcc, vpath, dims_bind, data, spath, out_path,
                                          args.steps, vcache, args.cpu, args.opt)
                    work.append(dict(name=name, fut=fut, fwd=fwd, dims=dims, start=start, batches=batches,
                                     opt=opt, attrs=attrs, clip=clip, out=out_path, model=vpath))

        n_pass = n_fail = 0
        worst_loss = worst_param = worst_cond = 0.0
        n_ill = n_ungated = 0
        for w in work:
            name = w["name"]
            if name.endswith("/forward"):
                # The forward alone on the reference evaluator (no training involved).
                (_, xs), (_, ys) = w["batches"]
                with torch.no_grad():
                    p = {k: torch.from_numpy(v) for k, v in w["init"].items()}
                    tl = float(w["fwd"](p, torch.from_numpy(xs[0]), torch.from_numpy(ys[0]), w["dims"]).item())
                dl, err = w["fut"].result()
                el = rel_scalar(dl, tl) if dl is not None else float("inf")
                ok = dl is not None and el <= TOL
                n_pass += ok
                n_fail += not ok
                worst_loss = max(worst_loss, el if dl is not None else 0.0)
                print(f"{'ok  ' if ok else 'FAIL'} {name:40s} loss {el:.2e}"
                      f"  (reference evaluator {dl!r}, torch {tl!r})")
                if err:
                    print(f"     dlcc failed: {err}")
                continue
            t0 = time.monotonic()
            targs = (w["fwd"], w["dims"], w["start"], w["batches"], w["opt"], w["attrs"], w["clip"], args.steps)
            ref = run_torch(*targs)
            t_torch = time.monotonic() - t0
            noise_runs = [None]

            def noise_runs_get():
                # The float64 and permuted-batch runs, made when first needed: a case whose every
                # quantity passes the strict gate against float32 torch passes the conditioning
                # gate too, so most cases never pay for them.
                if noise_runs[0] is None:
                    r64 = run_torch(*targs, dtype=torch.float64)
                    rperm = run_torch(w["fwd"], w["dims"], w["start"], permuted(w["batches"], 99),
                                      w["opt"], w["attrs"], w["clip"], args.steps)
                    noise_runs[0] = (r64, rperm)
                return noise_runs[0]

            cond = ""
            if args.conditioning:
                r64, _ = noise_runs_get()
                c = max([rel_scalar(a, b) for a, b in zip(ref[0], r64[0])] +
                        [rel_tensor(ref[2][k], r64[2][k], 1e-6) for k in ref[2]] +
                        [rel_tensor(ref[3][k], r64[3][k], 1e-12) for k in ref[3]])
                worst_cond = max(worst_cond, c)
                cond = f" f32-vs-f64 {c:.2e}{' ILL' if c > TOL / 5 else ''}"
            if args.torch_only:
                print(f"{name:40s} torch {t_torch:.2f}s losses {ref[0][0]:.6f} .. {ref[0][-1]:.6f}"
                      f" grad_norm {ref[1][0]:.4f} .. {ref[1][-1]:.4f}{cond}")
                continue
            rows, err, t_dlcc = w["fut"].result()
            gate = Gate()
            if rows is None:
                gate.problems = [f"dlcc failed: {err}"]
            else:
                try:
                    got, meta = st_read(w["out"])
                except Exception as e:  # a missing or malformed file is a failure, not a crash
                    gate.problems = [f"cannot read {w['out']}: {e}"]
                else:
                    nsteps = w["start"][2] + args.steps
                    gate = compare(name, rows, got, meta, ref, None, None, nsteps, False)
                    if gate.problems or args.conditioning or args.verbose:
                        r64, rperm = noise_runs_get()
                        gate = compare(name, rows, got, meta, ref, r64, rperm, nsteps, args.verbose)
            problems = gate.problems
            wl = gate.worst
            worst_loss, worst_param = max(worst_loss, wl["loss"]), max(worst_param, wl["param"])
            n_ill += gate.ill
            n_ungated += gate.ungated
            ok = not problems
            n_pass += ok
            n_fail += not ok
            gated = ""
            if gate.ill or gate.ungated:
                gated = f" [{gate.ill} by conditioning, {gate.ungated} ungated; noise {gate.max_noise:.1e}]"
            print(f"{'ok  ' if ok else 'FAIL'} {name:40s} loss {wl['loss']:.2e} grad_norm {wl['grad_norm']:.2e}"
                  f" param {wl['param']:.2e} slot {wl['slot']:.2e}{cond}{gated}"
                  f"  (dlcc {t_dlcc:.2f}s, torch {t_torch:.2f}s)")
            for pr in problems:
                print(f"     {pr}")
            if problems:
                print(f"     model: {w['model']}")
            sys.stdout.flush()
        if args.conditioning:
            print(f"parity: largest float32-vs-float64 torch error {worst_cond:.3g}")
        if args.torch_only:
            print(f"parity: torch only, {time.monotonic() - t_start:.1f}s")
            return 0
        print(f"parity: {n_ill} quantities gated by their float32 conditioning, {n_ungated} too"
              f" chaotic in float32 to gate (first steps still strict)")
        print(f"parity: {n_pass} passed, {n_fail} failed, largest loss rel err {worst_loss:.3g},"
              f" largest param rel err {worst_param:.3g} ({time.monotonic() - t_start:.1f}s)")
        if n_fail and not args.keep:
            print("parity: rerun with --keep to keep the models and data")
        return 1 if n_fail or n_pass == 0 else 0
    finally:
        pool.shutdown(wait=True)
        if args.keep:
            print(f"parity: files kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
