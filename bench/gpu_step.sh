#!/usr/bin/env bash
# bench/gpu_step.sh — issue 14's GPU benchmark: train-step time of dlcc against PyTorch eager and
# torch.compile(mode="reduce-overhead") on one GPU, float32 (TF32 off) and, for PyTorch, bfloat16.
#
#   bash bench/gpu_step.sh prepare [sm_90]   # development machine: compile, record compile times
#   bash bench/gpu_step.sh run               # GPU machine (carry gpu-bench/): time both, print
#
# prepare compiles each model of the issue's table (bench/models/, -D for the batch) for
# cuda:SM with a cold cache (the whole `dlcc compile` process, wall clock) and again as a warm
# cache hit, writes the artifacts, a random batch each, the LLVM-free runner
# (tests/cuda/gpu_replay.c: 10 warm-up steps, then 200 timed) and libdlrt into gpu-bench/.
# run times dlcc's step with it and PyTorch's with bench/gpu_step.py, and prints one table.
# dlcc has no bfloat16 GPU path yet (tensor cores: issue 14), so its bf16 column is empty.
set -u
cd "$(dirname "$0")/.."
OUT=${GPU_BENCH_DIR:-gpu-bench}
BUILD=${BUILD:-build}
PY=${PYTHON:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3 )}
# name model-file dim batch
CONFIGS="mlp_small_b32:mlp_small_adam:N:32 mlp_512_b128:mlp_512_adam:N:128
mlp_1024_b256:mlp_1024_adam:N:256 mlp_1024_b4096:mlp_1024_adam:N:4096 cnn_b64:cnn:N:64
cnn_b1024:cnn:N:1024 transformer_b8:transformer:B:8 transformer_b64:transformer:B:64"

die() { echo "gpu_step: $*" >&2; exit 2; }
ns() { date +%s%N; }
div() { awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { printf f, a / b }'; }

prepare() {
    local sm=${1:-sm_90}
    [ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release ||
        die "cmake failed"
    ninja -C "$BUILD" dlcc gpu_replay dlrt || die "build failed"
    rm -rf "$OUT" && mkdir -p "$OUT/bin" "$OUT/lib" || die "mkdir"
    cp "$BUILD/tests/gpu_replay" "$OUT/bin/" && strip "$OUT/bin/gpu_replay"
    cp -P "$BUILD"/libdlrt.so* "$OUT/lib/" && strip "$OUT"/lib/libdlrt.so.*.*.*
    local cache; cache=$(mktemp -d)
    echo "compile times, cuda:$sm, $(lscpu | sed -n 's/^Model name: *//p' | head -1)" | tee "$OUT/compile.txt"
    for c in $CONFIGS; do
        IFS=: read -r name model dim batch <<< "$c"
        local t0 t1 t2
        t0=$(ns)
        "$BUILD/dlcc" compile "bench/models/$model.dlg" -D "$dim=$batch" --target "cuda:$sm" \
            --cache-dir "$cache" -o "$OUT/$name.so" || die "compiling $name"
        t1=$(ns)
        "$BUILD/dlcc" compile "bench/models/$model.dlg" -D "$dim=$batch" --target "cuda:$sm" \
            --cache-dir "$cache" -o "$OUT/$name.so" || die "compiling $name again"
        t2=$(ns)
        printf '%-16s cold %s ms   warm (cache hit, whole process) %s ms\n' "$name" \
            "$(div $((t1 - t0)) 1000000 %.0f)" "$(div $((t2 - t1)) 1000000 %.1f)" |
            tee -a "$OUT/compile.txt"
        "$PY" - "$OUT" "$name" "bench/models/$model.dlg" "$dim" "$batch" <<'PY' || die "batch of $name"
import re, sys, numpy as np
out, name, path, dim, batch = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
rng = np.random.default_rng(1)
args = []
for m in re.finditer(r"^input\s+(\w+)\s*:\s*(\w+)\[([^\]]*)\]", open(path).read(), re.M):
    nm, ty = m.group(1), m.group(2)
    shape = [batch if d.strip() == dim else int(d) for d in m.group(3).split(",")]
    a = (rng.standard_normal(shape).astype(np.float32) if ty.startswith("float")
         else rng.integers(0, 8, size=shape).astype(np.int64))
    np.save(f"{out}/{name}.{nm}.npy", a)
    args.append(f"{nm}={out}/{name}.{nm}.npy")
open(f"{out}/{name}.inputs", "w").write(" ".join(args) + "\n")
PY
    done
    rm -rf "$cache"
    du -sh "$OUT"
}

run() {
    [ -d "$OUT/bin" ] || die "no $OUT/: run 'bash bench/gpu_step.sh prepare' first (and carry it)"
    export LD_LIBRARY_PATH="$PWD/$OUT/lib"
    command -v nvidia-smi >/dev/null && nvidia-smi -L
    python3 -c "import torch; print('PyTorch', torch.__version__, torch.cuda.get_device_name())"
    cat "$OUT/compile.txt"
    printf '\n%-16s %9s %9s %9s %9s %9s %8s %8s\n' config dlcc_fp32 eager_fp32 ro_fp32 \
        eager_bf16 ro_bf16 x_eager x_ro
    for c in $CONFIGS; do
        IFS=: read -r name model dim batch <<< "$c"
        local d e r eb rb
        # shellcheck disable=SC2046
        d=$("$OUT/bin/gpu_replay" bench "$OUT/$name.so" 200 $(cat "$OUT/$name.inputs") |
            sed -n 's/^ms_per_step //p')
        e=$(python3 bench/gpu_step.py "$model" "$batch" eager fp32 | sed -n 's/^ms_per_step //p')
        r=$(python3 bench/gpu_step.py "$model" "$batch" reduce-overhead fp32 2>/dev/null |
            sed -n 's/^ms_per_step //p')
        eb=$(python3 bench/gpu_step.py "$model" "$batch" eager bf16 | sed -n 's/^ms_per_step //p')
        rb=$(python3 bench/gpu_step.py "$model" "$batch" reduce-overhead bf16 2>/dev/null |
            sed -n 's/^ms_per_step //p')
        local xe="-" xr="-"
        if [ -n "$d" ] && [ -n "$e" ]; then xe=$(div "$e" "$d" %.2f); fi
        if [ -n "$d" ] && [ -n "$r" ]; then xr=$(div "$r" "$d" %.2f); fi
        printf '%-16s %9s %9s %9s %9s %9s %8s %8s\n' "$name" "${d:-fail}" "${e:-fail}" \
            "${r:-fail}" "${eb:-fail}" "${rb:-fail}" "$xe" "$xr"
    done
    echo "(ms per train step; x_eager, x_ro: PyTorch's fp32 time / dlcc's, > 1: dlcc is faster)"
}

case "${1:-}" in
prepare) shift; prepare "$@" ;;
run) run ;;
*) echo "usage: bash bench/gpu_step.sh prepare [sm_XX] | run" >&2; exit 2 ;;
esac
