#!/usr/bin/env bash
# tests/train_cli/test_watch.sh — long `dlcc train` runs a person can watch and trust: the
# metrics log (--log FILE.jsonl / FILE.csv, --log-every), checkpoints during training
# (--save-every N / Ts), --resume (the losses, learning rates, gradient norms, epoch lines and
# test of an interrupted and resumed run equal those of a run never stopped, bit for bit),
# Ctrl-C / SIGTERM (exit 130 / 143, the checkpoint, the resume command) and the refusals
# (another model, batch, seed or data; a checkpoint without a position; bad arguments).
# The MLP sample on random .npy data: 320 samples in batches of 32, 10 steps per epoch.
# usage: test_watch.sh DLCC SOURCE_DIR
source "$(dirname "$0")/lib.sh"
watch_data
sed 's/^model mlp_fmnist/model other_mlp/' mlp.dlg > other.dlg

# ---- the log
expect 0 "--log run.jsonl: 3 epochs, cosine schedule" train mlp.dlg "${data[@]}" --epochs 3 \
  --lr-schedule cosine --log run.jsonl --save full.safetensors
cp "$out" full3.out
check "one JSON record per step and one for the test, every field there" $py - <<'PYEOF'
import json, math, sys
recs = [json.loads(l) for l in open("run.jsonl")]
steps = [r for r in recs if r["kind"] == "step"]
evals = [r for r in recs if r["kind"] == "eval"]
ok = len(steps) == 30 and len(evals) == 1 and recs[-1]["kind"] == "eval"
for i, r in enumerate(steps):
    want = {"kind", "step", "epoch", "loss", "lr", "grad_norm", "skipped", "samples_per_s", "time_s"}
    if set(r) != want or r["step"] != i + 1 or r["epoch"] != i // 10 + 1 or r["skipped"] != 0:
        print("bad record", r); ok = False
    if not all(math.isfinite(r[k]) and r[k] >= 0 for k in ("loss", "lr", "grad_norm", "time_s")):
        print("bad values", r); ok = False
# cosine: lr/2 (1 + cos(pi t / T)) with the model's lr 0.001
if abs(steps[15]["lr"] - 0.0005 * (1 + math.cos(math.pi * 15 / 30))) > 1e-12:
    print("lr of step 16:", steps[15]["lr"]); ok = False
if any(b["time_s"] < a["time_s"] for a, b in zip(steps, steps[1:])):
    print("time goes backwards"); ok = False
e = evals[0]
if e["step"] != 30 or e["eval_samples"] != 100 or e["eval_loss_samples"] != 96 or \
        not 0 <= e["eval_accuracy"] <= 1 or not math.isfinite(e["eval_loss"]):
    print("eval record", e); ok = False
sys.exit(not ok)
PYEOF
check "the test accuracy of the log is the one printed" $py - "$out" <<'PYEOF'
import json, re, sys
acc = float(re.search(r"test accuracy: ([0-9.]+)", open(sys.argv[1]).read()).group(1))
e = json.loads(open("run.jsonl").read().splitlines()[-1])
sys.exit(abs(e["eval_accuracy"] - acc) > 1e-4)
PYEOF

expect 0 "--log run.csv --log-every 4" train mlp.dlg "${data[@]}" --epochs 3 --lr-schedule cosine \
  --log run.csv --log-every 4
check "CSV: a header, a row every 4 steps, the same losses as the JSON log" $py - <<'PYEOF'
import csv, json, sys
rows = list(csv.DictReader(open("run.csv")))
js = {r["step"]: r for r in map(json.loads, open("run.jsonl")) if r["kind"] == "step"}
head = open("run.csv").readline().strip().split(",")
ok = head[:9] == ["kind", "step", "epoch", "loss", "lr", "grad_norm", "skipped", "samples_per_s",
                  "time_s"] and "eval_loss" in head and "eval_accuracy" in head
st = [r for r in rows if r["kind"] == "step"]
ok = ok and [int(r["step"]) for r in st] == [4, 8, 12, 16, 20, 24, 28]
for r in st:
    j = js[int(r["step"])]
    if float(r["loss"]) != j["loss"] or float(r["lr"]) != j["lr"] or \
            float(r["grad_norm"]) != j["grad_norm"]:
        print("differs:", r, j); ok = False
ev = [r for r in rows if r["kind"] == "eval"]
ok = ok and len(ev) == 1 and ev[0]["loss"] == "" and float(ev[0]["eval_accuracy"]) >= 0
sys.exit(not ok)
PYEOF

expect_msg 2 "--log with another suffix is refused" "--log run.txt: the format comes from the suffix" \
  train mlp.dlg "${data[@]}" --log run.txt
check "... and creates nothing" test ! -e run.txt
expect_msg 1 "--log in a missing directory: an error before training" "--log nodir/run.jsonl: cannot open" \
  train mlp.dlg "${data[@]}" --log nodir/run.jsonl --save never.safetensors
check "... no epoch ran, no checkpoint" test ! -s "$out" -a ! -e never.safetensors
expect_msg 2 "--log-every without --log" "--log-every only applies with --log" train mlp.dlg \
  "${data[@]}" --log-every 2
expect_msg 2 "--log-every 0" "--log-every expects an integer >= 1" train mlp.dlg "${data[@]}" \
  --log x.jsonl --log-every 0
rm -f bad.jsonl
expect 1 "a run that fails before its first step leaves no log" train mlp.dlg --dataset \
  npy:x.npy,missing.npy --batch 32 --log bad.jsonl
check "... no bad.jsonl" test ! -e bad.jsonl

# ---- --save-every
expect_msg 2 "--save-every without --save" "--save-every needs --save" train mlp.dlg "${data[@]}" \
  --save-every 5
for bad in 0 -3 5x 1.5m m; do
  expect_msg 2 "--save-every $bad is refused" "--save-every expects N (steps) or a time" train \
    mlp.dlg "${data[@]}" --save ck.safetensors --save-every "$bad"
done
expect 0 "--save-every 7 -v" train mlp.dlg "${data[@]}" --epochs 2 --save every.safetensors \
  --save-every 7 -v
check "checkpoints at steps 7 and 14, then the final one" test "$(grep -c '^dlcc: step [0-9]*: wrote every.safetensors$' "$err")" -eq 2 \
  -a "$(grep -c '^dlcc: wrote every.safetensors$' "$err")" -eq 1
check "the final checkpoint holds the loop's position (step 20 of 10 per epoch)" $py - <<'PYEOF'
import json, struct, sys
b = open("every.safetensors", "rb").read()
m = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]
want = {"dlcc.train.step": "20", "dlcc.train.steps_per_epoch": "10", "dlcc.train.batch": "32",
        "dlcc.train.world": "1", "dlcc.train.seed": "0", "dlcc.train.epoch_samples": "320",
        "dlcc.model": "mlp_fmnist", "dlcc.step": "20"}
bad = {k: (m.get(k), v) for k, v in want.items() if m.get(k) != v}
print(bad or "ok")
sys.exit(bool(bad))
PYEOF
check "no temporary file left beside it" test -z "$(ls | grep -v -E '\.(dlg|npy|jsonl|csv|safetensors|out)$|^cache$|^tmp$')"
expect 0 "--save-every 1s (time) is accepted" train mlp.dlg "${data[@]}" --save t.safetensors \
  --save-every 1s
expect 0 "--save-every 2h" train mlp.dlg "${data[@]}" --save t.safetensors --save-every 2h

# ---- --resume from a checkpoint at an epoch's end: 1 epoch, then resumed to 3, equals 3 at once
# (constant schedule: the same lr whatever the planned length)
expect 0 "3 epochs in one go" train mlp.dlg "${data[@]}" --epochs 3 --log one.jsonl
cp "$out" one.out
expect 0 "1 epoch (no test)" train mlp.dlg --dataset npy:x.npy,y.npy --batch 32 --threads 2 \
  --epochs 1 --log two.jsonl --save e1.safetensors
cp "$out" two.out
expect 0 "resumed for epochs 2 and 3" train mlp.dlg "${data[@]}" --epochs 3 --log two.jsonl \
  --resume e1.safetensors
cat two.out "$out" > two_all.out
grep -v '^test accuracy' one.out > one_cmp.out
grep '^test accuracy' one.out >> one_cmp.out

# same_run A B: the logs agree on every step's loss, lr, grad_norm, skipped and on the test
same_run() {
  $py - "$1" "$2" <<'PYEOF'
import json, sys
def key(path):
    out = []
    for r in map(json.loads, open(path)):
        if r["kind"] == "step":
            out.append(("step", r["step"], r["epoch"], r["loss"], r["lr"], r["grad_norm"], r["skipped"]))
        else:
            out.append(("eval", r["step"], r.get("eval_loss"), r.get("eval_accuracy")))
    return out
a, b = key(sys.argv[1]), key(sys.argv[2])
if a != b:
    print(len(a), "records against", len(b))
    for x, y in zip(a, b):
        if x != y:
            print("first difference:", x, y); break
sys.exit(a != b)
PYEOF
}
# the epoch lines without their timings
epoch_lines() { sed 's/, [0-9.]* s, .*samples.s,/,/; s/, data wait.*//' "$1" | grep -E '^(epoch|test)'; }
check "resumed at an epoch's end: every logged value equals the uninterrupted run's" same_run one.jsonl two.jsonl
check "... and the epoch lines and test accuracy too" cmp <(epoch_lines one.out) <(epoch_lines two_all.out)

# wait_lines FILE N: until FILE has N lines (at most 120 s)
wait_lines() {
  for _ in $(seq 1 12000); do
    if [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ]; then return 0; fi
    sleep 0.01
  done
}

# interrupt SIGNAL LOG LINES ARGS...: starts dlcc ARGS in the background (stdout, stderr into
# LOG's base name .out / .err), sends SIGNAL once LOG has LINES lines, waits; sets $rc.
interrupt() {
  local sig=$1 log=$2 lines=$3 pid
  shift 3
  "$dlcc" "$@" --log "$log" >"${log%.jsonl}.out" 2>"${log%.jsonl}.err" &
  pid=$!
  wait_lines "$log" "$lines"
  kill "-$sig" "$pid"
  wait "$pid"
  rc=$?
}

# ---- Ctrl-C in the middle of a run, then --resume: the run of 2000 steps never stopped ...
long=(train mlp.dlg "${data[@]}" --epochs 200 --lr-schedule warmup-cosine)
expect 0 "200 epochs, warmup-cosine, uninterrupted" "${long[@]}" --log ref.jsonl
cp "$out" ref.out
# ... and the same run, interrupted once it has logged 200 steps
interrupt INT cut.jsonl 200 "${long[@]}" --save cut.safetensors
check "SIGINT: exit status 130" test "$rc" -eq 130
check "SIGINT: 'interrupted at step S (epoch E); resume with: ...'" \
  grep -qE "^dlcc train: interrupted at step [0-9]+ \(epoch [0-9]+\); resume with: dlcc train mlp.dlg --dataset npy:x.npy,y.npy .* --save cut.safetensors --log cut.jsonl --resume cut.safetensors$" cut.err
check "SIGINT: it stopped before the end, the log ends at that step" $py - <<'PYEOF'
import json, re, sys
s = int(re.search(r"interrupted at step (\d+) \(epoch (\d+)\)", open("cut.err").read()).group(1))
recs = [json.loads(l) for l in open("cut.jsonl")]
e = re.search(r"\(epoch (\d+)\)", open("cut.err").read()).group(1)
sys.exit(not (200 <= s < 2000 and recs[-1]["step"] == s and recs[-1]["epoch"] == int(e)
              and all(r["kind"] == "step" for r in recs)))
PYEOF
check "SIGINT: the checkpoint holds that step" $py - <<'PYEOF'
import json, re, struct, sys
s = re.search(r"interrupted at step (\d+)", open("cut.err").read()).group(1)
b = open("cut.safetensors", "rb").read()
m = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]
sys.exit(m.get("dlcc.train.step") != s)
PYEOF
resume_cmd=$(sed -n 's/^dlcc train: interrupted at step .*; resume with: dlcc //p' cut.err)
# the printed command, run as printed (its words need no quoting here)
read -r -a resume_args <<< "$resume_cmd"
expect 0 "the printed resume command runs" "${resume_args[@]}"
cat cut.out "$out" > cut_all.out
check "interrupted + resumed: every logged value equals the uninterrupted run's, bit for bit" \
  same_run ref.jsonl cut.jsonl
check "... and every epoch line and the test accuracy" cmp <(epoch_lines ref.out) <(epoch_lines cut_all.out)

# SIGTERM without --save: the checkpoint goes beside the model, exit 143
interrupt TERM term.jsonl 50 "${long[@]}"
check "SIGTERM: exit status 143" test "$rc" -eq 143
check "SIGTERM without --save: mlp.interrupted.safetensors beside the model, named in the message" \
  grep -qE "resume with: dlcc train .* --resume mlp.interrupted.safetensors$" term.err
check "... and it exists" test -s mlp.interrupted.safetensors

# ---- refusals
expect_msg 2 "--resume and --init together" "--resume and --init exclude each other" train \
  mlp.dlg "${data[@]}" --resume e1.safetensors --init e1.safetensors
expect_msg 1 "--resume with another batch" "the run had batch 32, this one has N = 64 (resume with --batch 32)" \
  train mlp.dlg --dataset npy:x.npy,y.npy --batch 64 --epochs 3 --resume e1.safetensors
expect_msg 1 "--resume with another model" "a checkpoint of model 'mlp_fmnist', not of 'other_mlp'" \
  train other.dlg "${data[@]}" --epochs 3 --resume e1.safetensors
expect_msg 1 "--resume with another --seed" "the run was shuffled with --seed 0, not 5" \
  train mlp.dlg "${data[@]}" --epochs 3 --seed 5 --resume e1.safetensors
expect_msg 1 "--resume with other data" "the run had 320 samples per epoch (10 steps), this data gives 160 (5 steps)" \
  train mlp.dlg "${data[@]}" --epochs 3 --limit-train 160 --resume e1.safetensors
expect_msg 1 "--resume past the run's end" "the checkpoint is at step 20, past the 10 steps of --epochs 1" \
  train mlp.dlg "${data[@]}" --epochs 1 --resume every.safetensors
$py - <<'PYEOF'
import numpy as np
r = np.random.default_rng(1)
np.save("xs.npy", r.standard_normal((1, 32, 784)).astype(np.float32))
np.save("ys.npy", r.integers(0, 10, (1, 32)).astype(np.int64))
PYEOF
expect 0 "a checkpoint of 'dlcc run --entry train_step'" run mlp.dlg -D N=32 --entry train_step \
  --in x=xs.npy --in y=ys.npy --save-params steps.safetensors
expect_msg 1 "--resume from it: no training position" "holds no training position (dlcc.train.step)" \
  train mlp.dlg "${data[@]}" --resume steps.safetensors
expect 0 "... which --init takes" train mlp.dlg "${data[@]}" --init steps.safetensors
$py - <<'PYEOF'
import json, struct
b = open("e1.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"]["dlcc.train.batch"] = "thirty-two"
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open("forged.safetensors", "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PYEOF
expect_msg 1 "--resume from a checkpoint with a malformed position" \
  "--resume forged.safetensors: metadata dlcc.train.batch is malformed: 'thirty-two'" \
  train mlp.dlg "${data[@]}" --epochs 3 --resume forged.safetensors
expect_msg 1 "--resume from a missing file" "--resume nothere.safetensors" train mlp.dlg \
  "${data[@]}" --resume nothere.safetensors
finish
