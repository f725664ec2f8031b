#!/usr/bin/env bash
# tests/train_cli/test_diverge.sh — divergence is never silent. `dlcc train` and `dlcc run --entry
# train_step` warn at the first non-finite step (naming the step, epoch and batch), stop with exit
# 4 after --max-skipped-steps of them in a row, or with fewer finite steps than that between them
# (default 10; 0 never stops), and write no checkpoint;
# --detect-anomaly names the node (op, output, FILE:LINE:COL) where the first non-finite value of
# that step appears, replayed in the reference evaluator; non-finite training data is refused up
# front (exit 1, naming the sample); losses print readably (%.4g, "nan"). Before: exit 0, every
# step skipped, a checkpoint written and a NaN pixel silently poisoning the normalisation.
# usage: test_diverge.sh DLCC SOURCE_DIR
source "$(dirname "$0")/lib.sh"

# Models: Log of a MatMul that goes negative (NaN in the forward pass, line 11 col 8); a division
# by a data input holding a zero (line 12 col 8); a finite one; one with a huge finite loss.
cat > lognan.dlg <<'EOF'
# Log of a MatMul that goes negative: the forward pass makes NaN.
model lognan
dim N = 4

input x : float[N, 3]
input y : int64[N]

param w : float[3, 2] = glorot_uniform(seed = 1)

h    = MatMul (x, w)
l    = Log (h)
loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (l, y)

output loss

train loss {
  optimizer = sgd <lr = 0.1>
}
EOF
cat > divzero.dlg <<'EOF'
# A division by a data input that holds a zero.
model divzero
dim N = 4

input x : float[N, 3]
input z : float[N, 2]
input y : int64[N]

param w : float[3, 2] = glorot_uniform(seed = 1)

h    = MatMul (x, w)
q    = Div (h, z)
loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (q, y)

output loss

train loss {
  optimizer = sgd <lr = 0.1>
}
EOF
sed -e 's/^model lognan/model finite/' -e 's/= Log (h)/= Relu (h)/' -e 's/^output loss$/output l\noutput loss/' \
  lognan.dlg > finite.dlg
cat > huge.dlg <<'EOF'
# A finite loss near 1e15: the progress line must stay readable.
model huge
dim N = 4

input x : float[N, 3]
input y : int64[N]

param w : float[3, 2] = glorot_uniform(seed = 1)
const k : float[] = 1e15

h    = MatMul (x, w)
l    = Relu (h)
ce   = SoftmaxCrossEntropyLoss <reduction = "mean"> (l, y)
loss = Mul (ce, k)

output loss

train loss {
  optimizer = sgd <lr = 0>
}
EOF

$py - <<'PYEOF' || { echo "FAIL cannot make the inputs with $py + numpy"; exit 1; }
import numpy as np
r = np.random.default_rng(0)
x = r.standard_normal((16, 3)).astype(np.float32)
np.save("x.npy", x)
np.save("y.npy", r.integers(0, 2, 16).astype(np.int64))
xn = x.copy(); xn[13, 2] = np.nan
np.save("xnan.npy", xn)
xi = x.copy(); xi[9, 0] = -np.inf
np.save("xinf.npy", xi)
np.save("xs.npy", r.standard_normal((5, 4, 3)).astype(np.float32))
np.save("ys.npy", r.integers(0, 2, (5, 4)).astype(np.int64))
z = np.ones((4, 2), np.float32); z[2, 1] = 0
np.save("z.npy", z)
PYEOF

# ---- dlcc train
expect 4 "train: NaN in every step stops after 10 (the default)" train lognan.dlg \
  --dataset npy:x.npy,y.npy --epochs 5 --save ck.safetensors
check "... warns at the first non-finite step, naming step, epoch and batch" grep -qF \
  "dlcc train: warning: step 1 (epoch 1, batch 1 of 4) is non-finite (loss nan, grad_norm nan): its update was skipped" "$err"
check "... warns once" test "$(grep -c 'warning: step' "$err")" -eq 1
check "... says it diverged, where, and that no checkpoint was written" grep -qF \
  "dlcc train: error: training diverged at step 10 (epoch 3, batch 2 of 4): 10 consecutive non-finite steps from step 1 on (--max-skipped-steps 10; 0 never stops); no checkpoint written to ck.safetensors" "$err"
check "... no checkpoint" test ! -e ck.safetensors
check "... the two finished epochs, then nothing" test "$(grep -c '^epoch [0-9]*: mean loss nan' "$out")" -eq 2 -a \
  "$(wc -l < "$out")" -eq 2
check "... the progress line prints the loss as nan" grep -qF "loss nan  " "$err"

expect 4 "train: --max-skipped-steps 3" train lognan.dlg --dataset npy:x.npy,y.npy --epochs 5 \
  --max-skipped-steps 3
check "... stops at step 3" grep -qF "training diverged at step 3 (epoch 1, batch 3 of 4): 3 consecutive" "$err"

expect 0 "train: --max-skipped-steps 0 never stops" train lognan.dlg --dataset npy:x.npy,y.npy \
  --epochs 2 --max-skipped-steps 0 --save ck0.safetensors
check "... but warns at the first and counts them at the end" grep -qF \
  "training goes on regardless (--max-skipped-steps 0)" "$err"
check "... the count" grep -qF "dlcc train: warning: 8 of 8 steps were non-finite" "$err"
check "... and writes the checkpoint asked for (the params of the last finite update)" test -s ck0.safetensors

expect 4 "train: --detect-anomaly" train lognan.dlg --dataset npy:x.npy,y.npy --epochs 5 \
  --detect-anomaly --max-skipped-steps 2
check "... names the node: Log at lognan.dlg:11:8, output 'l'" grep -qE \
  "^lognan.dlg:11:8: warning: --detect-anomaly: step 1 \(epoch 1, batch 1 of 4\): the first non-finite value appears in output 'l' of Log \(forward graph" "$err"
check "... with the range of its input (negative values for Log)" grep -qE \
  "^lognan.dlg:11:8: note: the inputs of that Log are finite: 'h' in \[-[0-9.]+, [0-9.]+\]" "$err"
check "... and the caret under the op" grep -qE '^ +11 \| l    = Log \(h\)$' "$err"

expect 0 "train: a finite run" train finite.dlg --dataset npy:x.npy,y.npy --epochs 2 --detect-anomaly
check "... no warning" test ! -s "$err" -o "$(grep -c 'non-finite\|anomaly' "$err")" -eq 0

expect 0 "train: a huge finite loss is not divergence (not by default)" train huge.dlg \
  --dataset npy:x.npy,y.npy --epochs 1
check "... and prints readably (%.4g), not as 31 digits" grep -qE \
  "^epoch 1/1  step 4/4  loss [0-9]\.[0-9]{1,3}e\+(14|15)  " "$err"
check "... the epoch line too" grep -qE "^epoch 1: mean loss [0-9]\.[0-9]{1,5}e\+(14|15), " "$out"

expect_msg 1 "train: a NaN in the data is refused up front" \
  "data loader: xnan.npy: sample 13 holds a non-finite value (nan at element 2 of 3); the data must be finite" \
  train finite.dlg --dataset npy:xnan.npy,y.npy --save ck1.safetensors
check "... before any training, no checkpoint" test ! -s "$out" -a ! -e ck1.safetensors
expect_msg 1 "train: -inf in the test set too" "data loader: xinf.npy: sample 9 holds a non-finite value (-inf" \
  train finite.dlg --dataset npy:x.npy,y.npy --test npy:xinf.npy,y.npy
expect 0 "train: --limit-train leaves the bad sample out" train finite.dlg \
  --dataset npy:xnan.npy,y.npy --limit-train 12

expect_msg 2 "train: --max-skipped-steps -1" "--max-skipped-steps expects an integer >= 0, got '-1'" \
  train finite.dlg --dataset npy:x.npy,y.npy --max-skipped-steps -1
expect_msg 2 "train: --max-skipped-steps x" "--max-skipped-steps expects an integer >= 0, got 'x'" \
  train finite.dlg --dataset npy:x.npy,y.npy --max-skipped-steps x

# ---- dlcc run --entry train_step
expect 4 "run: a division by zero stops after --max-skipped-steps 2" run divzero.dlg \
  --entry train_step --steps 5 --in x=xs.npy --in z=z.npy --in y=ys.npy --max-skipped-steps 2 \
  --detect-anomaly --save-params p.safetensors
check "... two step lines, skipped" test "$(grep -c '^step [12] loss [-a-z0-9.e+]* grad_norm [-a-z0-9.e+]* skipped 1$' "$out")" -eq 2 -a \
  "$(wc -l < "$out")" -eq 2
check "... warns at step 1" grep -qF "dlcc run: warning: step 1 is non-finite" "$err"
check "... --detect-anomaly names the Div at divzero.dlg:12:8" grep -qE \
  "^divzero.dlg:12:8: warning: --detect-anomaly: step 1: the first non-finite value appears in output 'q' of Div \(forward graph, node 2 of [0-9]+\): 1 of 8 elements non-finite, the first \(element 5\) -?inf" "$err"
check "... its inputs: z reaches 0" grep -qE "^divzero.dlg:12:8: note: the inputs of that Div are finite: 'h' in \[[-0-9.e]+, [-0-9.e]+\], 'z' in \[0, 1\]" "$err"
check "... diverged, nothing saved" grep -qF \
  "dlcc run: error: training diverged at step 2: 2 consecutive non-finite steps from step 1 on (--max-skipped-steps 2; 0 never stops); no checkpoint written to p.safetensors" "$err"
check "... no --save-params file" test ! -e p.safetensors

expect 0 "run: --max-skipped-steps 0" run lognan.dlg --entry train_step --steps 3 --in x=xs.npy \
  --in y=ys.npy --max-skipped-steps 0
check "... nan printed as nan" test "$(grep -c '^step [123] loss nan grad_norm nan skipped 1$' "$out")" -eq 3
check "... counted" grep -qF "dlcc run: warning: 3 of 3 steps were non-finite" "$err"

# A streak need not be unbroken: params that blew up alternate non-finite steps with finite ones.
# N non-finite steps with fewer than N finite ones between them stop the run; N finite steps in
# a row are a recovery. (alt.dlg: Log of row sums, lr 0: NaN exactly for the batches of alt*.npy
# with a negative row.)
cat > alt.dlg <<'EOF'
model alt
dim N = 2

input x : float[N, 3]
input y : int64[N]

param w : float[3, 2] = constant(1)

h    = MatMul (x, w)
l    = Log (h)
loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (l, y)

output loss

train loss {
  optimizer = sgd <lr = 0>
}
EOF
$py -c "
import numpy as np
good = np.full((2, 3), 0.5, np.float32); bad = good.copy(); bad[1] = -1
np.save('alt1.npy', np.stack([bad, good, bad, good, bad, good]))
np.save('alt2.npy', np.stack([bad, good, good, good, bad, good, good, good, bad]))
np.save('alty.npy', np.zeros((9, 2), np.int64))
" || { echo "FAIL cannot make alt*.npy"; exit 1; }
expect_msg 4 "run: bad, good, bad, good, bad stops at the third (--max-skipped-steps 3)" \
  "dlcc run: error: training diverged at step 5: 3 non-finite steps among the 5 from step 1 on, never 3 finite ones in a row between them" \
  run alt.dlg --entry train_step --steps 6 --in x=alt1.npy --in y=alty.npy --max-skipped-steps 3
expect 0 "run: 3 finite steps in a row between them are a recovery" run alt.dlg --entry train_step \
  --steps 9 --in x=alt2.npy --in y=alty.npy --max-skipped-steps 3
check "... counted" grep -qF "dlcc run: warning: 3 of 9 steps were non-finite" "$err"

# Dynamic loss scaling: a skipped step with a finite loss while the scale comes down is the
# scaler backing off (init 3e38 overflows the scaled gradients for ~10 steps), not divergence.
# The same scale held static is never going to recover: those steps count.
cat > ls.dlg <<'EOF'
model ls
dim N = 4
input x : float[N, 3]
input y : int64[N]
param w : float[3, 2] = glorot_uniform(seed = 1)
const k : float[] = 1000
h    = MatMul (x, w)
r    = Relu (h)
ce   = SoftmaxCrossEntropyLoss <reduction = "mean"> (r, y)
loss = Mul (ce, k)
output loss
train loss {
  optimizer = sgd <lr = 0.0001>
  loss_scale = dynamic <init = 3e38, backoff = 0.5>
}
EOF
sed 's/loss_scale = dynamic <init = 3e38, backoff = 0.5>/loss_scale = 3e38/' ls.dlg > ls_static.dlg
$py -c "
import numpy as np
r = np.random.default_rng(3)
np.save('xs20.npy', r.standard_normal((20, 4, 3)).astype(np.float32))
np.save('ys20.npy', r.integers(0, 2, (20, 4)).astype(np.int64))
" || { echo "FAIL cannot make xs20.npy"; exit 1; }
expect 0 "run: dynamic loss-scale backoff is not divergence" run ls.dlg --entry train_step \
  --steps 20 --in x=xs20.npy --in y=ys20.npy --max-skipped-steps 2
check "... steps were skipped while the scale came down, then trained" \
  test "$(grep -c 'skipped 1$' "$out")" -ge 3 -a "$(tail -1 "$out" | grep -c 'skipped 0$')" -eq 1
check "... no warning" test ! -s "$err"
expect_msg 4 "run: the same scale, static, stops" "training diverged at step 2: 2 consecutive" \
  run ls_static.dlg --entry train_step --steps 20 --in x=xs20.npy --in y=ys20.npy --max-skipped-steps 2

expect_msg 2 "run: --detect-anomaly needs --entry train_step" \
  "--detect-anomaly only applies to --entry train_step" run lognan.dlg --detect-anomaly \
  --in x=x.npy --in y=y.npy
expect_msg 2 "run: --max-skipped-steps needs --entry train_step" \
  "--max-skipped-steps only applies to --entry train_step" run lognan.dlg --max-skipped-steps 3 \
  --in x=x.npy --in y=y.npy
expect 0 "compile lognan to an artifact" compile lognan.dlg -o lognan.so
expect_msg 2 "run: --detect-anomaly needs the .dlg" "needs the .dlg model; 'lognan.so' is a compiled artifact" \
  run lognan.so --entry train_step --in x=xs.npy --in y=ys.npy --detect-anomaly
expect 4 "run: an artifact stops too" run lognan.so --entry train_step --steps 5 --in x=xs.npy \
  --in y=ys.npy --max-skipped-steps 4
check "... after 4 steps" test "$(wc -l < "$out")" -eq 4

# ---- exit statuses: --help, README and docs/status.md agree
expect 0 "dlcc --help" --help
check "--help lists the exit statuses 0-4, 130, 143" grep -qF \
  "exit status: 0 success, 1 invalid input, 2 bad usage, 3 internal error (such as out of memory), 4 training diverged, 130 / 143 training interrupted by SIGINT / SIGTERM" "$out"
check "README.md says the same" grep -qF \
  "Exit status: 0 success, 1 invalid input (the model, a \`.npy\`, a data set, an ONNX file), 2 bad usage, 3 internal error (such as out of memory), 4 training diverged" "$src/README.md"
check "... and 130 / 143" grep -qF "130 / 143 training interrupted by SIGINT / SIGTERM" "$src/README.md"
check "docs/status.md too" grep -qF "exit 0 / 1 / 2 / 3 / 4 (3 = internal error such as out of memory; 4 = training diverged; 130 / 143 = \`dlcc train\` interrupted by SIGINT / SIGTERM)" \
  "$src/docs/status.md"
finish
