#!/usr/bin/env bash
# tests/train_cli/test_map.sh — `--map FILE`: a checkpoint whose names are not the model's (a
# PyTorch state_dict saved with safetensors, with a BatchNorm step counter) loaded by
# `dlcc run --params` (both backends, and --entry train_step) and `dlcc train --init` through
# the rename rules of a map file (exact and prefix rules, comments); the predictions and test
# loss against NumPy; the PyTorch-only buffer skipped with a note; a bad map file is an error at
# FILE:LINE:COL; --map without --params / --init, or with --resume, is a usage error.
# usage: test_map.sh DLCC SOURCE_DIR
source "$(dirname "$0")/lib.sh"

cat >reg.dlg <<'DLG'
model reg
dim N = 8
input  x : float[N, 3]
input  t : float[N, 1]
param  w : float[3, 1] = zeros
param  b : float[1]    = zeros
p      = Gemm (x, w, b)
loss   = MeanSquaredError <reduction = "mean"> (p, t)
output p
output loss
train loss {
  optimizer = sgd <lr = 0.1>
}
DLG
$py - <<'PYEOF' || { echo "FAIL cannot make the data with $py + numpy"; exit 1; }
import json, struct
import numpy as np
def save(path, tensors):  # safetensors, as safetensors.torch.save_file writes it
    head, blobs, off = {}, [], 0
    for k, v in tensors.items():
        b = np.ascontiguousarray(v).tobytes()
        head[k] = {"dtype": {"float32": "F32", "int64": "I64"}[str(v.dtype)],
                   "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h = json.dumps(head).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
r = np.random.default_rng(0)
W = r.standard_normal((3, 1)).astype(np.float32); B = np.array([0.25], np.float32)
save("torch.safetensors", {"lin.weight": W, "lin.bias": B,
                           "bn.num_batches_tracked": np.array(7, np.int64)})
save("prefixed.safetensors", {"model.w": W, "model.b": B})
X = r.standard_normal((8, 3)).astype(np.float32)
np.save("x.npy", X); np.save("t.npy", (X @ W + B + 0.5).astype(np.float32))
np.save("xs.npy", np.stack([X] * 2)); np.save("ts.npy", np.stack([np.load("t.npy")] * 2))
np.save("want.npy", X.astype(np.float64) @ W + B)
PYEOF
printf '# PyTorch names -> the model names\nlin.weight  w\nlin.bias    b     # a comment after a rule\n' >names.map
printf 'model.* *\n' >prefix.map
close() { $py -c "import sys, numpy as np; sys.exit(not np.allclose(np.load('$1'), np.load('want.npy'), rtol=1e-5, atol=1e-6))"; }

expect 0 "run --params with --map (exact rules, comments)" \
  run reg.dlg --params torch.safetensors --map names.map --in x=x.npy --out p=p.npy
check "... predicts with the renamed params" close p.npy
expect 0 "run --backend ref --params with --map" \
  run reg.dlg --backend ref --params torch.safetensors --map names.map --in x=x.npy --out p=p_ref.npy
check "... the same" close p_ref.npy
expect 0 "a prefix rule ('model.* *')" \
  run reg.dlg --params prefixed.safetensors --map prefix.map --in x=x.npy --out p=p_pre.npy
check "... the same" close p_pre.npy
expect_msg 1 "without --map the file's names are refused, naming the param" \
  "param 'w'" run reg.dlg --params torch.safetensors --in x=x.npy --out p=never.npy
check "... and nothing is written" test ! -e never.npy

expect 0 "run --entry train_step --params with --map" \
  run reg.dlg --entry train_step --steps 2 --in x=xs.npy --in t=ts.npy --params torch.safetensors \
  --map names.map --save-params st.safetensors
check "... notes the PyTorch-only buffer it skips" \
  grep -qF "torch.safetensors: note: 'bn.num_batches_tracked' skipped: a PyTorch-only buffer" "$err"
check "... and starts from the renamed params (the first loss is 0.25, the offset's square)" \
  grep -qE "^step 1 loss 0\.25 " "$out"

expect 0 "train --init with --map (lr 0: the params stay)" \
  train reg.dlg --data x=x.npy --data t=t.npy --test-data x=x.npy --test-data t=t.npy --batch 8 \
  --init torch.safetensors --map names.map --lr 0 --save tr.safetensors
check "... notes the skipped buffer" \
  grep -qF "torch.safetensors: note: 'bn.num_batches_tracked' skipped" "$err"
check "... test loss 0.25: the renamed params" grep -qE "^test loss: 0\.25 " "$out"

# A bad map file: FILE:LINE:COL and the offending name underlined.
printf 'lin.weight w\nlin.bias\n' >one.map
expect_msg 1 "a rule with one name" "one.map:2:1: error: 'lin.bias' has no new name: a rule is FROM TO" \
  run reg.dlg --params torch.safetensors --map one.map --in x=x.npy
check "... with the line and a caret" grep -qE '^ +\| \^~+$' "$err"
printf 'lin.weight w extra\n' >three.map
expect_msg 1 "a third name" "three.map:1:14: error: a third name on the line" \
  train reg.dlg --data x=x.npy --data t=t.npy --batch 8 --init torch.safetensors --map three.map
printf '\n\nlin.* w\n' >star.map
expect_msg 1 "a prefix rule with '*' on one side" \
  "star.map:3:7: error: 'lin.* w': a prefix rule ends in '*' on both sides" \
  run reg.dlg --params torch.safetensors --map star.map --in x=x.npy
printf 'l*n.weight w\n' >mid.map
expect_msg 1 "a '*' inside a name" "mid.map:1:2: error: 'l*n.weight': a '*' may only end a name" \
  run reg.dlg --params torch.safetensors --map mid.map --in x=x.npy
expect_msg 1 "a missing map file" "missing.map: error: --map: cannot read the file" \
  run reg.dlg --params torch.safetensors --map missing.map --in x=x.npy
printf 'lin.weight w\nlin.bias w\n' >twice.map
expect_msg 1 "two tensors landing on one param" "'lin.weight' and 'lin.bias' both land on param 'w'" \
  run reg.dlg --params torch.safetensors --map twice.map --in x=x.npy --out p=never.npy
expect_msg 2 "run --map without --params" "--map renames the tensors of the --params checkpoint" \
  run reg.dlg --map names.map --in x=x.npy
expect_msg 2 "train --map without --init" "--map renames the tensors of --init's checkpoint" \
  train reg.dlg --data x=x.npy --data t=t.npy --batch 8 --map names.map
expect_msg 2 "train --map with --resume" "(--resume reads a checkpoint of dlcc train" \
  train reg.dlg --data x=x.npy --data t=t.npy --batch 8 --resume tr.safetensors --map names.map
finish
