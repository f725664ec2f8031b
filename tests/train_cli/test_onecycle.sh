#!/usr/bin/env bash
# tests/train_cli/test_onecycle.sh — `dlcc train --lr-schedule one-cycle` against PyTorch's own
# torch.optim.lr_scheduler.OneCycleLR (defaults, max_lr = --lr): every step's lr of the
# --dry-run plan, for several run lengths (including ones where 0.3 T is not a whole step).
# Exits 77 (skipped) when /usr/bin/python3 has no torch. usage: test_onecycle.sh DLCC SOURCE_DIR
source "$(dirname "$0")/lib.sh"
$py -c "import torch" 2>/dev/null || { echo "skip: no torch for $py"; exit 77; }
mlp=$src/samples/mlp_fmnist.dlg
$py -c "
import numpy as np
r = np.random.default_rng(0)
np.save('X.npy', r.standard_normal((70, 784)).astype(np.float32))
np.save('Y.npy', r.integers(0, 10, 70).astype(np.int64))
" || { echo "FAIL cannot make the data"; exit 1; }
for args in "--batch 10 --epochs 1" "--batch 7 --epochs 3" "--batch 1 --epochs 1" "--batch 35 --epochs 1"; do
  # shellcheck disable=SC2086
  run_dlcc train "$mlp" --dataset npy:X.npy,Y.npy $args --lr 0.3 --lr-schedule one-cycle --dry-run
  if [ "$rc" -eq 0 ] && $py - "$out" <<'PYEOF'; then pass "one-cycle = OneCycleLR ($args)"; else fail "one-cycle = OneCycleLR ($args)"; fi
import sys, warnings
import torch
warnings.filterwarnings("ignore")
steps = [float(l.split()[3]) for l in open(sys.argv[1]) if l.startswith("step ")]
T = len(steps)
p = torch.nn.Parameter(torch.zeros(1))
opt = torch.optim.SGD([p], lr=0.3)
sch = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.3, total_steps=T)
ok = T > 0
for t in range(T):
    want = opt.param_groups[0]["lr"]
    if abs(steps[t] - want) > 1e-8 * abs(want):
        print("step", t + 1, "lr", steps[t], "torch", want); ok = False
    opt.step(); sch.step()
sys.exit(not ok)
PYEOF
done
finish
