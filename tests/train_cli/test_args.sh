#!/usr/bin/env bash
# tests/train_cli/test_args.sh — `dlcc run --entry train_step` and `dlcc train` up to the point
# where training starts: argument errors (exit 2, naming the argument), model and data errors
# (exit 1, naming the file), the data pipeline (IDX plain and gzip, .npy float32 and uint8,
# normalisation statistics) and the plan printed by `dlcc train --dry-run` (learning-rate
# schedules, seeded shuffling). Needs no training runtime. usage: test_args.sh DLCC SOURCE_DIR
source "$(dirname "$0")/lib.sh"
mlp=$src/samples/mlp_fmnist.dlg

# Inputs and data sets (uint8 / float32 .npy, IDX plain and gzip), and a model without `train`.
$py - <<'PYEOF' || { echo "FAIL cannot make the inputs with $py + numpy"; exit 1; }
import gzip, struct
import numpy as np
r = np.random.default_rng(0)
np.save("x.npy", r.standard_normal((8, 784)).astype(np.float32))
np.save("xs.npy", r.standard_normal((3, 8, 784)).astype(np.float32))
np.save("y.npy", r.integers(0, 10, 8).astype(np.int64))
np.save("y32.npy", r.integers(0, 10, 8).astype(np.int32))
X = r.integers(0, 256, (300, 28, 28)).astype(np.uint8)
Y = r.integers(0, 10, 300).astype(np.int64)
np.save("X.npy", X)
np.save("Y.npy", Y)
np.save("Y32.npy", Y.astype(np.int32))
np.save("Xf.npy", (X.reshape(300, 784) / 255.0).astype(np.float32))
np.save("Xbad.npy", r.random((300, 20)).astype(np.float32))
np.save("Xi64.npy", X.astype(np.int64))
np.save("Yf.npy", Y.astype(np.float32))
np.save("Yshort.npy", Y[:299])
Ybig = Y.copy(); Ybig[7] = 10
np.save("Ybig.npy", Ybig)
def idx(path, a, code, gz):
    data = bytes([0, 0, code, a.ndim]) + b"".join(struct.pack(">I", d) for d in a.shape) + a.tobytes()
    (gzip.open if gz else open)(path, "wb").write(data)
idx("img.idx", X, 0x08, False)
idx("lab.idx.gz", Y.astype(np.uint8), 0x08, True)
idx("timg.idx.gz", X[:50], 0x08, True)
idx("tlab.idx", Y[:50].astype(np.uint8), 0x08, False)
idx("lab12.idx", (np.arange(300) % 12).astype(np.uint8), 0x08, False)
# Statistics the trainer must print for the uint8 set: x/255, mean and population std.
x = X.astype(np.float64) / 255.0
open("stats.txt", "w").write("%.6g %.6g\n" % (x.mean(), x.std()))
# [S, 4, 14, 14] float32 samples (784 values) with channels far apart: per-channel statistics.
X4 = (X.reshape(300, 4, 14, 14) / 255.0 + np.arange(4).reshape(1, 4, 1, 1) * 10).astype(np.float32)
np.save("X4.npy", X4)
x4 = X4.astype(np.float64)
open("stats4.txt", "w").write(" ".join("%r %r" % (x4[:, c].mean(), x4[:, c].std()) for c in range(4)))
PYEOF
sed '/^train loss {/,/^}/d' "$mlp" >notrain.dlg

# ---------------------------------------------------------------------------------------------
# dlcc run --entry train_step: usage errors

expect_msg 2 "run: --steps without train_step" "--steps only applies to --entry train_step" \
  run "$mlp" --steps 3
expect_msg 2 "run: --save-params without train_step" "--save-params only applies to --entry train_step" \
  run "$mlp" --save-params p.safetensors
expect_msg 2 "run: unknown entry" "unknown entry point 'bogus' (available: infer, train_step)" \
  run "$mlp" --entry bogus
expect_msg 2 "run: --steps 0" "--steps expects an integer 1..1000000000, got '0'" \
  run "$mlp" --entry train_step --steps 0
expect_msg 2 "run: --steps not a number" "--steps expects an integer 1..1000000000, got '3x'" \
  run "$mlp" --entry train_step --steps 3x
expect_msg 2 "run: train_step with --backend ref" "--entry train_step runs compiled code" \
  run "$mlp" --entry train_step --backend ref
expect_msg 2 "run: train_step with --out" "--out probs: --entry train_step writes no outputs" \
  run "$mlp" --entry train_step --out probs=p.npy
expect_msg 2 "run: empty --init-params" "--init-params needs a file name" \
  run "$mlp" --entry train_step --init-params=
expect 0 "run --help" run --help
check "run --help documents --entry train_step" grep -qF -- "--save-params PATH" "$out"

# Model and input errors (exit 1)
expect_msg 1 "run: model without a train block" "model 'mlp_fmnist' has no train block" \
  run notrain.dlg -D N=8 --entry train_step --in x=x.npy --in y=y.npy
expect_msg 1 "run: label dtype must match" "input 'y': expected dtype int64, got int32 (from y32.npy" \
  run "$mlp" -D N=8 --entry train_step --steps 3 --in x=xs.npy --in y=y32.npy
expect_msg 1 "run: stepped input too short" "input 'x': expected float[8, 784], or [K, ...] with K >= 4 steps, got float[3, 8, 784]" \
  run "$mlp" -D N=8 --entry train_step --steps 4 --in x=xs.npy --in y=y.npy
expect_msg 1 "run: missing input" "missing input 'y': expected int64[8]" \
  run "$mlp" -D N=8 --entry train_step --in x=x.npy
expect 1 "run: a stepped input is refused by --entry infer" run "$mlp" -D N=8 --in x=xs.npy --in y=y.npy

# ---------------------------------------------------------------------------------------------
# dlcc train: usage errors (exit 2, naming the argument)

expect 0 "help train" help train
check "help train shows the usage" grep -qF "usage: dlcc train MODEL.dlg --dataset SPEC" "$out"
check "help train: partial batch is dropped" grep -qF "final" "$out"
check "help train: --threads gives identical results" grep -qF "the results are identical for every T" "$out"
expect 0 "dlcc --help lists train" --help
check "dlcc --help lists train" grep -qE "^  train +train a model" "$out"
expect_msg 2 "train: no model" "dlcc train: error: no model file" train --dataset fashion-mnist
expect_msg 2 "train: missing dataset" "no data set (give one with --dataset" train "$mlp"
expect_msg 2 "train: unknown schedule" "--lr-schedule: unknown schedule 'linear' (constant, step, cosine, warmup-cosine, one-cycle)" \
  train "$mlp" --dataset fashion-mnist --lr-schedule linear
expect_msg 2 "train: --batch 0" "--batch expects an integer >= 1, got '0'" train "$mlp" --dataset fashion-mnist --batch 0
expect_msg 2 "train: --epochs 0" "--epochs expects an integer 1..1000000, got '0'" train "$mlp" --dataset fashion-mnist --epochs 0
expect_msg 2 "train: --threads 0" "--threads expects an integer 1..256, got '0'" train "$mlp" --dataset fashion-mnist --threads 0
expect_msg 2 "train: negative --lr" "--lr expects a finite number >= 0, got '-1'" train "$mlp" --dataset fashion-mnist --lr -1
expect_msg 2 "train: --lr nan" "--lr expects a finite number >= 0, got 'nan'" train "$mlp" --dataset fashion-mnist --lr nan
expect_msg 2 "train: bad --seed" "--seed expects an integer 0..2^64-1, got '-3'" train "$mlp" --dataset fashion-mnist --seed -3
expect_msg 2 "train: --loader-threads 0" "--loader-threads expects an integer 1..256, got '0'" train "$mlp" --dataset fashion-mnist --loader-threads 0
expect_msg 2 "train: --prefetch 1" "--prefetch expects an integer 2..1024, got '1'" train "$mlp" --dataset fashion-mnist --prefetch 1
expect_msg 2 "train: bad --limit-train" "--limit-train expects an integer >= 1, got '0'" train "$mlp" --dataset fashion-mnist --limit-train 0
expect_msg 2 "train: --warmup-steps without warmup-cosine" "--warmup-steps only applies to --lr-schedule warmup-cosine" \
  train "$mlp" --dataset fashion-mnist --warmup-steps 10
expect_msg 2 "train: unknown dataset" "--dataset: unknown data set 'cifar10'" train "$mlp" --dataset cifar10
expect_msg 2 "train: npy spec without a comma" "--dataset expects npy:X.npy,Y.npy, got 'npy:X.npy'" \
  train "$mlp" --dataset npy:X.npy
expect_msg 2 "train: --test of another kind" "--test expects npy:X.npy,Y.npy (the same kind as --dataset)" \
  train "$mlp" --dataset npy:X.npy,Y.npy --test idx:a,b
expect_msg 2 "train: --test with fashion-mnist" "--test: the fashion-mnist data set brings its own test set" \
  train "$mlp" --dataset fashion-mnist --test npy:X.npy,Y.npy
expect_msg 2 "train: unknown flag" "dlcc train: error: unknown flag '--frob'" train "$mlp" --frob
expect_msg 2 "train: --batch and -D disagree" "--batch 16 and -D N=8 disagree (N is the batch dim)" \
  train "$mlp" --dataset npy:X.npy,Y.npy -D N=8 --batch 16
expect_msg 2 "train: warm-up as long as training" "--warmup-steps 4 must be below the 4 steps of training" \
  train "$mlp" --dataset npy:X.npy,Y.npy --batch 64 --lr-schedule warmup-cosine --warmup-steps 4 --dry-run

# Model and data errors (exit 1, naming the file; the data files are the runtime loader's to check)
expect_msg 1 "train: model without a train block" "notrain.dlg: error: model 'mlp_fmnist' has no train block" \
  train notrain.dlg --dataset npy:X.npy,Y.npy
expect_msg 1 "train: wrong per-sample size" "Xbad.npy: error: samples of shape [20] (20 values each) do not fit the model's data input 'x' float[N, 784] (784 values per sample)" \
  train "$mlp" --dataset npy:Xbad.npy,Y.npy --batch 64
expect_msg 1 "train: transformer input does not take 784 values" "do not fit the model's data input 'x' float[B, T, C] (512 values per sample)" \
  train "$src/samples/transformer_block.dlg" --dataset npy:X.npy,Y.npy --dry-run
expect 0 "train: int64 samples are numbers too (not pixels: no /255)" \
  train "$mlp" --dataset npy:Xi64.npy,Y.npy --batch 64 --dry-run
check "... 300 samples, statistics of the raw values" \
  $py -c "import re,sys; m=re.search(r'normalised with mean ([0-9.e+-]+) std', open('$out').read()); sys.exit(not (m and float(m.group(1)) > 1))"
expect_msg 1 "train: float labels" "data loader: Yf.npy: labels must be a rank-1 integer array ([N]), got floats of rank 1" \
  train "$mlp" --dataset npy:X.npy,Yf.npy
expect_msg 1 "train: label count" "data loader: Yshort.npy: 299 labels for the 300 samples of X.npy (one per sample)" \
  train "$mlp" --dataset npy:X.npy,Yshort.npy
expect_msg 1 "train: label out of range" "data loader: Ybig.npy: label 10 of sample 7 is outside [0, 10)" \
  train "$mlp" --dataset npy:X.npy,Ybig.npy
expect_msg 1 "train: missing data file" "data loader: nope.npy: cannot read the samples: No such file" train "$mlp" --dataset npy:nope.npy,Y.npy
expect_msg 1 "train: fewer samples than a batch" "data loader: 300 samples make no full batch of 512 (the partial batch is dropped" \
  train "$mlp" --dataset npy:X.npy,Y.npy --batch 512
expect_msg 1 "train: missing fashion-mnist directory" "dataset-fashion-mnist" \
  train "$mlp" --dataset fashion-mnist:$work/nodir
check "... and the message names the directory" grep -qF "$work/nodir" "$err"
expect_msg 1 "train: --save into a missing directory" "nodir/c.safetensors: error: cannot write the checkpoint there" \
  train "$mlp" --dataset npy:X.npy,Y.npy --save nodir/c.safetensors
expect_msg 1 "train: IDX labels out of range (the model has 10 classes)" "data loader: lab12.idx: label 10 of sample 10 is outside [0, 10)" \
  train "$mlp" --dataset idx:img.idx,lab12.idx
expect_msg 1 "train: IDX labels of rank 3" "data loader: img.idx: labels need rank 1 ([N]), got rank 3" \
  train "$mlp" --dataset idx:img.idx,img.idx

# ---------------------------------------------------------------------------------------------
# The data pipeline and the plan (--dry-run: no compile, no training)

expect 0 "dry run on uint8 .npy" train "$mlp" --dataset npy:X.npy,Y.npy --batch 64 --dry-run
check "plan: 4 steps per epoch, 44 samples dropped" grep -qF "batch dim N = 64, 4 steps per epoch (44 samples dropped), 4 steps, lr 0.001 (constant schedule)" "$out"
read -r mean std <stats.txt
check "mean/std of x/255 as numpy computes them" grep -qF "normalised with mean $mean std $std" "$out"
expect 0 "dry run on float32 .npy" train "$mlp" --dataset npy:Xf.npy,Y32.npy --batch 64 --dry-run
check "float32 data gives the same statistics" grep -qF "normalised with mean $mean std $std" "$out"
expect 0 "dry run on IDX (plain images, gzip labels) with an IDX test set" \
  train "$mlp" --dataset idx:img.idx,lab.idx.gz --test idx:timg.idx.gz,tlab.idx --batch 100 --dry-run
check "IDX: 300 training and 50 test samples, same statistics" \
  grep -qF "300 training samples of [784 values], 50 test samples; normalised with mean $mean std $std" "$out"
expect 0 "dry run on [S, 4, 14, 14] samples" train "$mlp" --dataset npy:X4.npy,Y.npy --batch 64 --dry-run
check "per-channel mean and std, as numpy computes them (float32 data: 1e-5)" $py -c "
import re, sys
m = re.search(r'normalised with mean \[([^]]*)\] std \[([^]]*)\]', open('$out').read())
want = [float(v) for v in open('stats4.txt').read().split()]
got = [float(v) for v in m.group(1).split(',')] if m else []
sd = [float(v) for v in m.group(2).split(',')] if m else []
ok = len(got) == 4 and len(sd) == 4 and all(
    abs(got[c] - want[2 * c]) <= 1e-5 * abs(want[2 * c]) + 1e-6 and
    abs(sd[c] - want[2 * c + 1]) <= 1e-5 * want[2 * c + 1] for c in range(4))
sys.exit(not ok)"
expect 0 "--limit-train" train "$mlp" --dataset npy:X.npy,Y.npy --batch 10 --limit-train 100 --dry-run
check "--limit-train 100 gives 10 steps of 10" grep -qF "100 training samples of [784 values]" "$out"
check "... over the first 100 samples only" \
  $py -c "import sys; v=[int(t) for l in open('$out') if l.startswith('epoch 1 order:') for t in l.split()[3:]]; sys.exit(not (len(v)==8 and max(v)<100))"

# Schedules: every step's lr against the formulas.
check_sched() { # check_sched NAME EXPR(t, T) ARGS...
  local name=$1 expr=$2
  shift 2
  run_dlcc train "$mlp" --dataset npy:X.npy,Y.npy --batch 10 --epochs 2 --lr 0.5 --dry-run "$@"
  if [ "$rc" -eq 0 ] && $py - "$out" "$expr" <<'PYEOF'; then pass "$name"; else fail "$name"; fi
import math, sys
steps = [l.split() for l in open(sys.argv[1]) if l.startswith("step ")]
T = len(steps)
ok = T == 60
for s in steps:
    t = int(s[1]) - 1
    want = eval(sys.argv[2], {"math": math, "t": t, "T": T, "lr": 0.5})
    if abs(float(s[3]) - want) > 1e-9 * max(1.0, abs(want)):
        print("step", t + 1, "lr", s[3], "wanted", want); ok = False
sys.exit(not ok)
PYEOF
}
check_sched "constant schedule" "lr"
check_sched "step schedule (x0.1 at 50%, x0.01 at 75%)" "lr * (0.01 if 4*t >= 3*T else 0.1 if 2*t >= T else 1)" --lr-schedule step
check_sched "cosine schedule" "lr * 0.5 * (1 + math.cos(math.pi * t / T))" --lr-schedule cosine
check_sched "warmup-cosine, default warm-up 5% (3 steps)" \
  "lr * (t + 1) / 3 if t < 3 else lr * 0.5 * (1 + math.cos(math.pi * (t - 3) / (T - 3)))" --lr-schedule warmup-cosine
check_sched "warmup-cosine, --warmup-steps 10" \
  "lr * (t + 1) / 10 if t < 10 else lr * 0.5 * (1 + math.cos(math.pi * (t - 10) / (T - 10)))" --lr-schedule warmup-cosine --warmup-steps 10
# one-cycle: PyTorch's OneCycleLR (defaults), computed here from its definition; test_onecycle.sh
# compares with torch itself.
check_sched "one-cycle schedule (OneCycleLR's defaults)" \
  "(lambda m, lo, end: lr + (lo - lr) / 2 * (math.cos(math.pi * t / m) + 1) if t <= m else end + (lr - end) / 2 * (math.cos(math.pi * (t - m) / (T - 1 - m)) + 1))(0.3 * T - 1, lr / 25, lr / 25 / 1e4)" --lr-schedule one-cycle
run_dlcc train "$mlp" --dataset npy:X.npy,Y.npy --batch 10 --epochs 2 --lr-schedule cosine --dry-run
check "without --lr the model's own lr is the base (0.001)" grep -qE "^step 1 lr 0.001$" "$out"

# Shuffling: seeded, new order every epoch, reproducible.
order() { grep "^epoch $1 order:" "$out"; }
run_dlcc train "$mlp" --dataset npy:X.npy,Y.npy --batch 10 --epochs 2 --dry-run
e1=$(order 1) e2=$(order 2)
run_dlcc train "$mlp" --dataset npy:X.npy,Y.npy --batch 10 --epochs 2 --dry-run
check "the same seed gives the same order" test "$e1" = "$(order 1)" -a "$e2" = "$(order 2)"
check "each epoch has its own order" test "${e1#* order:}" != "${e2#* order:}"
run_dlcc train "$mlp" --dataset npy:X.npy,Y.npy --batch 10 --epochs 2 --dry-run --seed 7
check "another seed gives another order" test "${e1#* order:}" != "$(order 1 | sed 's/.* order://')"

# Fashion-MNIST (Debian's dataset-fashion-mnist): the plan on the real files.
if [ -d /usr/share/datasets/fashion-mnist ]; then
  expect 0 "fashion-mnist dry run" train "$mlp" --dataset fashion-mnist --batch 64 --limit-train 2048 --dry-run
  check "fashion-mnist: 2048 of the training samples, 10000 test samples" \
    grep -qF "2048 training samples of [784 values], 10000 test samples" "$out"
  expect 0 "fashion-mnist fits a [N, 1, 28, 28] input (cnn sample)" \
    train "$src/samples/cnn_fmnist.dlg" --dataset fashion-mnist --batch 32 --limit-train 64 --dry-run
else
  echo "skip fashion-mnist cases: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"
fi

check "no checkpoint or stray file was written" test -z "$(find . -name '*.safetensors' -o -name '*.tmp')"
finish
