#!/usr/bin/env bash
# tools/gpu-check.sh — issue 14's checks on a GPU, in two commands:
#
#   bash tools/gpu-check.sh prepare [sm_90]   # on the development machine (has LLVM, ptxas)
#   bash tools/gpu-check.sh run               # on the GPU machine (driver; no LLVM needed)
#
# prepare builds build/ (cmake + ninja when needed) and writes gpu-check/ (git-ignored; well
# under the device tool's 64 MiB: carry it with `run`'s carry ["gpu-check"]):
#   cases/     every codegen case (each op and gradient op, tests/codegen) compiled for
#              cuda:SM with its inputs and the reference evaluator's outputs (cg_check's
#              DLCC_TEST_EXPORT);
#   samples/   each sample compiled for cuda:SM and for this CPU, a random batch, the CPU's
#              losses over 6 train steps from the initial params, and the CPU's checkpoint
#              after 3 of them;
#   bin/, lib/ the replay runner (tests/cuda/gpu_replay.c) and libdlrt.
# run replays the cases on the GPU against the reference (the same tolerances as the CPU
# backend), trains each sample on the GPU and compares its losses with the CPU's, resumes the
# CPU's checkpoint on the GPU and compares the continuation, and runs compute-sanitizer (when
# the machine has it) on a sample's train steps. Last line: "gpu-check: N passed, M failed".
set -u
cd "$(dirname "$0")/.."
OUT=${GPU_CHECK_DIR:-gpu-check}
BUILD=${BUILD:-build}
SAMPLES="mlp_fmnist cnn_fmnist transformer_block"
# Python with NumPy (the system's on Debian; the GPU machine's PyTorch one there).
PY=${PYTHON:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )}
STEPS=6
RESUME_AT=3

die() { echo "gpu-check: $*" >&2; exit 2; }

prepare() {
    local sm=${1:-sm_90}
    if [ ! -f "$BUILD/build.ninja" ]; then
        cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo || die "cmake failed"
    fi
    ninja -C "$BUILD" dlcc test_codegen gpu_replay dlrt || die "build failed"
    rm -rf "$OUT" && mkdir -p "$OUT/cases" "$OUT/samples" "$OUT/bin" "$OUT/lib" || die "mkdir"
    echo "== the codegen cases for cuda:$sm"
    DLCC_TEST_CPU="cuda:$sm" DLCC_TEST_EXPORT="$OUT/cases" "$BUILD/tests/test_codegen" \
        > "$OUT/cases.log" 2>&1 || die "exporting the cases failed (see $OUT/cases.log)"
    tail -1 "$OUT/cases.log"
    echo "$(ls "$OUT/cases" | wc -l) cases exported"
    cp "$BUILD/tests/gpu_replay" "$OUT/bin/" && strip "$OUT/bin/gpu_replay"
    cp -P "$BUILD"/libdlrt.so* "$OUT/lib/" && strip "$OUT"/lib/libdlrt.so.*.*.*
    export LD_LIBRARY_PATH="$PWD/$OUT/lib"
    for s in $SAMPLES; do
        local d="$OUT/samples/$s"
        mkdir -p "$d"
        "$BUILD/dlcc" compile "samples/$s.dlg" --target "cuda:$sm" --no-cache -o "$d/cuda.so" ||
            die "compiling $s for cuda:$sm failed"
        "$BUILD/dlcc" compile "samples/$s.dlg" --no-cache -o "$d/cpu.so" || die "compiling $s"
        # A random batch for the model's inputs (floats N(0,1); integer labels in [0, 2), a
        # class of every classifier), from the artifact's own descriptions.
        (. "$BUILD/dlcc-python-env.sh" && "$PY" - "$d") <<'PY' || die "making the batch of $s"
import sys, numpy as np, dlcc
d = sys.argv[1]
m = dlcc.load(d + "/cpu.so")
rng = np.random.default_rng(1)
args = []
for t in m.inputs:
    a = (rng.standard_normal(t.shape).astype(np.float32) if t.dtype_name.startswith("float")
         else rng.integers(0, 2, size=t.shape).astype(np.dtype(t.dtype_name)))
    np.save(f"{d}/in_{t.name}.npy", a)
    args.append(f"{t.name}={d}/in_{t.name}.npy")
open(d + "/inputs.txt", "w").write(" ".join(args) + "\n")
PY
        local inputs; inputs=$(cat "$d/inputs.txt")
        # shellcheck disable=SC2086
        "$OUT/bin/gpu_replay" train "$d/cpu.so" "$STEPS" - $inputs > "$d/cpu.losses" ||
            die "the CPU run of $s failed"
        # shellcheck disable=SC2086
        GPU_REPLAY_SAVE="$d/cpu$RESUME_AT.safetensors" "$OUT/bin/gpu_replay" train "$d/cpu.so" \
            "$RESUME_AT" - $inputs > /dev/null || die "the CPU checkpoint of $s failed"
        rm "$d/cpu.so"
        echo "$s: cuda:$sm artifact, batch, $STEPS CPU losses, checkpoint after $RESUME_AT steps"
    done
    du -sh "$OUT"
}

# compare A B TOL: each line's loss within TOL relative (+ 1e-6 absolute) of the other's.
compare() {
    "$PY" - "$1" "$2" "$3" <<'PY'
import sys
a = [l.split() for l in open(sys.argv[1])]
b = [l.split() for l in open(sys.argv[2])]
tol = float(sys.argv[3])
ok = len(a) == len(b) and len(a) > 0
for x, y in zip(a, b):
    la, lb = float(x[3]), float(y[3])
    if abs(la - lb) > 1e-6 + tol * abs(lb) or x[7] != y[7]:
        ok = False
    print(f"  step {x[1]}: loss {la:.7g} vs {lb:.7g}, skipped {x[7]} vs {y[7]}")
sys.exit(0 if ok else 1)
PY
}

run() {
    [ -d "$OUT/cases" ] || die "no $OUT/: run 'bash tools/gpu-check.sh prepare' first (and carry it)"
    export LD_LIBRARY_PATH="$PWD/$OUT/lib"
    command -v nvidia-smi >/dev/null && nvidia-smi -L
    local passed=0 failed=0
    echo "== the codegen cases on the GPU against the reference evaluator"
    if "$OUT/bin/gpu_replay" "$OUT/cases"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
    for s in $SAMPLES; do
        local d="$OUT/samples/$s" inputs; inputs=$(cat "$d/inputs.txt")
        echo "== $s: $STEPS train steps on the GPU vs the CPU (relative 1e-3: float32 sums in another order)"
        # shellcheck disable=SC2086
        if "$OUT/bin/gpu_replay" train "$d/cuda.so" "$STEPS" - $inputs > "$d/gpu.losses" &&
            compare "$d/gpu.losses" "$d/cpu.losses" 1e-3; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1)); echo "FAIL $s: GPU losses"
        fi
        echo "== $s: the CPU's checkpoint after $RESUME_AT steps, resumed on the GPU"
        # shellcheck disable=SC2086
        if "$OUT/bin/gpu_replay" train "$d/cuda.so" $((STEPS - RESUME_AT)) \
            "$d/cpu$RESUME_AT.safetensors" $inputs > "$d/resume.losses" &&
            tail -n $((STEPS - RESUME_AT)) "$d/cpu.losses" > "$d/cpu.tail" &&
            compare "$d/resume.losses" "$d/cpu.tail" 1e-3; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1)); echo "FAIL $s: resumed losses"
        fi
    done
    local cs; cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    if [ -x "$cs" ]; then
        local d="$OUT/samples/mlp_fmnist" inputs; inputs=$(cat "$d/inputs.txt")
        echo "== compute-sanitizer (memcheck) on 2 train steps of mlp_fmnist"
        # shellcheck disable=SC2086
        if "$cs" --error-exitcode 99 "$OUT/bin/gpu_replay" train "$d/cuda.so" 2 - $inputs; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1)); echo "FAIL compute-sanitizer"
        fi
    else
        echo "== compute-sanitizer: not on this machine (skipped)"
    fi
    echo "gpu-check: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}

case "${1:-}" in
prepare) shift; prepare "$@" ;;
run) run ;;
*) echo "usage: bash tools/gpu-check.sh prepare [sm_XX] | run" >&2; exit 2 ;;
esac
