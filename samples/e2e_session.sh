#!/usr/bin/env bash
# samples/e2e_session.sh — one session as a new user lives it, from a build tree to predictions:
#   1. `cmake --install BUILD --prefix P`, then only P's programs (P/bin on PATH);
#   2. a small ResNet-style CNN in PyTorch (residual blocks, BatchNorm, ReLU, global average
#      pooling) exported to ONNX with a dynamic batch;
#   3. `dlcc import` with a cross-entropy loss and AdamW appended;
#   4. a data set as .npy (4096 Fashion-MNIST training images and 1000 test images when Debian's
#      dataset-fashion-mnist is installed, else random images whose class sets a bright square);
#   5. `dlcc train` with a metrics log and checkpoints every 20 steps, interrupted by SIGINT
#      (Ctrl-C) in its second epoch, then resumed with `--resume`;
#   6. `dlcc plot` of the log;
#   7. `dlcc run --params CKPT` predicting the test images (no labels), compared with PyTorch's
#      forward of the same params on the same images.
# Each step prints its command and output; the checks print "ok" or "FAIL". Exit 0 when every
# check passed, 1 otherwise, 77 when /usr/bin/python3 has no torch (nothing to export).
# About 30 s on 2 cores. usage: samples/e2e_session.sh BUILD_DIR [WORK_DIR]
# (WORK_DIR: where to leave the files, default a temporary directory removed at the end).
set -u
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: e2e_session.sh BUILD_DIR [WORK_DIR]" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
py=${PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch, numpy' 2>/dev/null; then
  echo "skip: $py has no torch (python3-torch): nothing to export"
  exit 77
fi
if [ $# -eq 2 ]; then
  mkdir -p "$2" && work=$(cd "$2" && pwd) || exit 2
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
cd "$work" || exit 2
export DLCC_CACHE_DIR=${DLCC_CACHE_DIR:-$work/cache}

failed=0
say() { printf '\n# %s\n' "$*"; }
show() { # the command as a user types it
  printf '$'
  printf ' %q' "$@"
  printf '\n'
}
run() { # run CMD...: shows it, runs it (output shown), sets $rc
  show "$@"
  "$@"
  rc=$?
}
check() { # check NAME COMMAND...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failed=$((failed + 1)); fi
}

say "1. install to a prefix; from here on only the installed programs are used"
run cmake --install "$build" --prefix "$work/prefix" >install.log
check "cmake --install exits 0" test "$rc" -eq 0
export PATH=$work/prefix/bin:$PATH
run command -v dlcc
check "dlcc is the installed one" test "$(command -v dlcc)" = "$work/prefix/bin/dlcc"
run dlcc --version

say "2. a ResNet-style CNN in PyTorch, exported to ONNX with a dynamic batch"
cat >net.py <<'PYEOF'
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.r1, self.r2 = Block(8), Block(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.stem(x)))
        x = self.r2(F.max_pool2d(self.r1(x), 2))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
PYEOF
cat >export.py <<'PYEOF'
import torch
from net import Net
torch.manual_seed(0)
# TrainingMode.PRESERVE keeps BatchNorm as BatchNormalization nodes (the default, EVAL, folds
# each one into the convolution before it); the model is in eval mode, so they read their
# running statistics, and dlcc's train step uses batch statistics and updates them.
torch.onnx.export(Net().eval(), torch.randn(2, 1, 28, 28), "resnet.onnx", opset_version=17,
                  input_names=["x"], output_names=["logits"],
                  dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                  training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
PYEOF
run "$py" export.py 2>export.err
check "torch.onnx.export exits 0" test "$rc" -eq 0

say "3. import it, with a loss and an optimizer appended"
run dlcc import resnet.onnx -o resnet.dlg --train-loss cross_entropy --optimizer adamw --lr 0.003
check "dlcc import exits 0" test "$rc" -eq 0
run grep -cE '^[^ ]+ += (Conv|BatchNormalization|Add|GlobalAveragePool) ' resnet.dlg
check "the model keeps its 5 convolutions, 5 BatchNorms, 2 residual adds and the global pool" \
  test "$(grep -cE '= (Conv|BatchNormalization|Add|GlobalAveragePool) ' resnet.dlg)" -eq 13
run grep -E '^(dim|input)' resnet.dlg
check "the dynamic batch is a named dim" grep -qE '^input +x +: float\[batch, 1, 28, 28\]$' resnet.dlg

say "4. the data, as .npy files"
cat >data.py <<'PYEOF'
import gzip, os
import numpy as np
d = "/usr/share/datasets/fashion-mnist"
if os.path.isdir(d):
    def read(name, n, offset, shape):
        raw = gzip.open(os.path.join(d, name)).read()
        return np.frombuffer(raw, np.uint8, offset=offset)[:n * int(np.prod(shape))].reshape((n,) + shape)
    X = read("train-images-idx3-ubyte.gz", 4096, 16, (1, 28, 28)).astype(np.float32) / 255
    Y = read("train-labels-idx1-ubyte.gz", 4096, 8, ()).astype(np.int64)
    TX = read("t10k-images-idx3-ubyte.gz", 1000, 16, (1, 28, 28)).astype(np.float32) / 255
    TY = read("t10k-labels-idx1-ubyte.gz", 1000, 8, ()).astype(np.int64)
    print("Fashion-MNIST: 4096 training and 1000 test images, pixels / 255")
else:  # random images; class k lights a 7x7 square at one of 10 places
    r = np.random.default_rng(0)
    def make(n):
        y = r.integers(0, 10, n)
        x = r.random((n, 1, 28, 28), dtype=np.float32) * 0.5
        for i, k in enumerate(y):
            x[i, 0, 7 * (k // 4):7 * (k // 4) + 7, 7 * (k % 4):7 * (k % 4) + 7] += 0.5
        return x, y.astype(np.int64)
    (X, Y), (TX, TY) = make(4096), make(1000)
    print("no Fashion-MNIST: 4096 training and 1000 test random images (a square per class)")
np.save("train_x.npy", X); np.save("train_y.npy", Y)
np.save("test_x.npy", TX); np.save("test_y.npy", TY)
PYEOF
run "$py" data.py
check "the data are written" test -s train_x.npy -a -s test_y.npy

say "5. train with a log and checkpoints every 20 steps; Ctrl-C in the second epoch"
train=(dlcc train resnet.dlg --data x=train_x.npy --data labels=train_y.npy
       --test-data x=test_x.npy --test-data labels=test_y.npy --normalize x
       --batch 64 --epochs 6 --threads 2 --save ckpt.safetensors --save-every 20 --log run.jsonl)
echo "$(show "${train[@]}") &"
"${train[@]}" >train1.out 2>train1.err &
pid=$!
# The log is flushed at each epoch's end: 64 step records mean the second epoch has begun.
for _ in $(seq 1 6000); do
  if [ -f run.jsonl ] && [ "$(wc -l <run.jsonl)" -ge 64 ]; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then break; fi
  sleep 0.02
done
sleep 0.3
echo "\$ kill -INT $pid   # Ctrl-C"
kill -INT "$pid"
wait "$pid"
rc=$?
cat train1.out train1.err
check "the interrupted run exits 130" test "$rc" -eq 130
stopped=$(sed -n 's/^dlcc train: interrupted at step \([0-9]*\) .*/\1/p' train1.err)
check "it says at which step it stopped and how to resume" \
  grep -qE '^dlcc train: interrupted at step [0-9]+ \(epoch 2\); resume with: dlcc train .* --resume ckpt\.safetensors$' train1.err
check "the checkpoint exists" test -s ckpt.safetensors

run "${train[@]}" --resume ckpt.safetensors
check "the resumed run exits 0" test "$rc" -eq 0
check "the log's steps run 1..384 once each, the resumed part from the step after $stopped" "$py" - "${stopped:-0}" <<'PYEOF'
import json, sys
stopped = int(sys.argv[1])
recs = [json.loads(l) for l in open("run.jsonl")]
steps = [r["step"] for r in recs if r["kind"] == "step"]
print(f"  {len(steps)} step records, first {steps[0]}, last {steps[-1]}; interrupted at {stopped},"
      f" resumed at {steps[steps.index(stopped) + 1]}")
sys.exit(not (steps == list(range(1, 385)) and 64 < stopped < 128))
PYEOF

say "6. plot the log"
run dlcc plot run.jsonl -o curve.svg
check "dlcc plot exits 0 and writes an SVG" test "$rc" -eq 0 -a -s curve.svg
check "... one polyline point per step" "$py" -c "
import sys, xml.etree.ElementTree as ET
ns = '{http://www.w3.org/2000/svg}'
lines = [p.get('points').split() for p in ET.parse('curve.svg').iter(ns + 'polyline')]
sys.exit(not any(len(p) == 384 for p in lines))"

say "7. predict the 1000 test images from the checkpoint (no labels needed)"
run dlcc run resnet.dlg -D batch=1000 --params ckpt.safetensors --in x=test_x.npy \
  --out logits=pred.npy
check "dlcc run exits 0" test "$rc" -eq 0
run "$py" - <<'PYEOF'
import json, struct, sys
import numpy as np, torch
from net import Net
# The checkpoint's params by name (PyTorch's state_dict names, kept by the import) and its
# stored normalisation, loaded into the PyTorch model in eval mode.
b = open("ckpt.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
head = json.loads(b[8:8 + n])
meta = head.pop("__metadata__")
dt = {"F32": np.float32, "I64": np.int64}
st = {k: torch.from_numpy(np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                                        dt[v["dtype"]]).reshape(v["shape"]).copy())
      for k, v in head.items()}
net = Net().eval()
missing, unexpected = net.load_state_dict(st, strict=False)
assert all(k.endswith("num_batches_tracked") for k in missing) and not unexpected, (missing, unexpected)
norm = meta["dlcc.normalize.x"]
mean = float(norm.split("mean=")[1].split()[0]); std = float(norm.split("std=")[1].split()[0])
x = torch.from_numpy((np.load("test_x.npy") - np.float32(mean)) / np.float32(std))
with torch.no_grad():
    want = net(x).numpy()
got, y = np.load("pred.npy"), np.load("test_y.npy")
err = np.abs(got - want).max()
agree = (got.argmax(1) == want.argmax(1)).mean()
print(f"prediction {got.shape} {got.dtype}; max |dlcc - torch| = {err:.2e}; argmax agrees on "
      f"{agree * 100:.1f} %; test accuracy {(got.argmax(1) == y).mean():.4f}")
sys.exit(not (got.shape == (1000, 10) and err <= 1e-3 * (1 + np.abs(want).max()) and agree >= 0.995))
PYEOF
check "the prediction is [1000, 10] and agrees with PyTorch's forward of the same params" \
  test "$rc" -eq 0

echo
if [ "$failed" -eq 0 ]; then echo "e2e session: every check passed"; else echo "e2e session: $failed check(s) failed"; fi
[ "$failed" -eq 0 ]
