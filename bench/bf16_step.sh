#!/usr/bin/env bash
# bench/bf16_step.sh — the train step in float32 and with `precision = bfloat16` (the products
# in bfloat16 with float32 accumulation: AMX tiles (tdpbf16ps) where the CPU has AMX-BF16,
# vdpbf16ps where it has AVX512-BF16, the float32 kernels on converted operands elsewhere), at 1
# and 2 threads, and the speed-up. On a CPU with AMX a third artifact is compiled with the host's
# features less amx-tile and amx-bf16, so the table also shows the vdpbf16ps step on the same
# machine. Results: docs/performance.md.
#
# usage: bash bench/bf16_step.sh [BUILD] [REPEAT]   (BUILD default: build; REPEAT default: 3)
#
# For the benchmark models bench/models/mlp_1024_adam.dlg (784-1024x3-10 at batch 256, Adam)
# and transformer.dlg (nn.TransformerEncoderLayer, [8, 128, 256], Adam) writes a bfloat16 copy
# (the train block with `precision = bfloat16` added), random inputs (python3 + numpy), compiles
# each with `BUILD/dlcc compile` and runs `BUILD/dlcc run ART.so --entry train_step --steps K
# --threads T -v` REPEAT times per configuration, alternating them, keeping the best mean step
# time of each (the time inside dlrt_session_train_step, as -v prints it). The CPU's bf16 support
# is printed first; load distorts the figures.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
repeat=${2:-3}
case $build in /*) ;; *) build=$root/$build ;; esac
if [ ! -f "$build/build.ninja" ]; then
    echo "bf16_step.sh: $build is not configured; run: cmake -S . -B $build -G Ninja" >&2
    exit 1
fi
ninja -C "$build" -j2 dlcc dlrt >/dev/null
dlcc=$build/dlcc
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlcc-bf16-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export DLCC_CACHE_DIR=$tmp/cache
unset DLRT_THREADS DLRT_PROFILE DLRT_DEBUG_SPLIT DLRT_SPLIT_BYTES

/usr/bin/python3 - "$tmp" <<'PYEOF'
import sys
import numpy as np
d = sys.argv[1]
r = np.random.default_rng(0)
np.save(f"{d}/mlp_x.npy", r.standard_normal((256, 784)).astype(np.float32))
np.save(f"{d}/mlp_y.npy", r.integers(0, 10, 256).astype(np.int64))
np.save(f"{d}/tr_x.npy", r.standard_normal((8, 128, 256)).astype(np.float32))
np.save(f"{d}/tr_t.npy", r.standard_normal((8, 128, 256)).astype(np.float32))
PYEOF

# name  model  inputs  steps
models=(
    "mlp-1024 mlp_1024_adam.dlg x=mlp_x.npy,y=mlp_y.npy 30"
    "transformer transformer.dlg x=tr_x.npy,target=tr_t.npy 10"
)
for m in "${models[@]}"; do
    read -r _ file _ _ <<<"$m"
    cp "$root/bench/models/$file" "$tmp/f32_$file"
    sed 's/^train loss {$/train loss {\n  precision = bfloat16/' "$root/bench/models/$file" \
        >"$tmp/bf16_$file"
    grep -q 'precision = bfloat16' "$tmp/bf16_$file" || {
        echo "bf16_step.sh: no 'train loss {' line in $file" >&2
        exit 1
    }
done

# mean_ms ART INPUTS STEPS THREADS: one run's mean step time in ms.
mean_ms() {
    local args=() i list
    IFS=, read -ra list <<<"$2"
    for i in "${list[@]}"; do args+=(--in "${i%%=*}=$tmp/${i#*=}"); done
    "$dlcc" run "$tmp/$1" --entry train_step --steps "$3" "${args[@]}" --threads "$4" -v \
        2>&1 >/dev/null | sed -n 's/^dlcc: .* mean \([0-9.]*\) ms per step.*/\1/p'
}

best() { /usr/bin/python3 -c "print(min(float(x) for x in '$*'.split()))"; }

bf=no amx=no
grep -qw avx512_bf16 /proc/cpuinfo && bf=yes
grep -qw amx_bf16 /proc/cpuinfo && grep -qw amx_tile /proc/cpuinfo && amx=yes
noamx=""
if [ $amx = yes ]; then
    # the host's LLVM features with AMX off (dlcc's --features replaces the host's list)
    noamx=$(/usr/bin/python3 - <<'PYEOF'
import ctypes
llvm = ctypes.CDLL("/usr/lib/llvm-19/lib/libLLVM.so.1")
llvm.LLVMGetHostCPUFeatures.restype = ctypes.c_char_p
f = llvm.LLVMGetHostCPUFeatures().decode().split(",")
print(",".join("-" + x[1:] if x[1:] in ("amx-tile", "amx-bf16", "amx-int8") else x for x in f))
PYEOF
)
fi
echo "bf16_step.sh: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')," \
    "avx512_bf16: $bf, amx_bf16: $amx, $(nproc) cores," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg), best of $repeat runs"
if [ $amx = yes ]; then
    printf '%-12s %7s %12s %14s %9s %16s %9s\n' model threads "float32 ms" "bf16 AMX ms" speed-up \
        "bf16 no-AMX ms" speed-up
else
    printf '%-12s %7s %12s %14s %9s\n' model threads "float32 ms" "bfloat16 ms" speed-up
fi
for m in "${models[@]}"; do
    read -r name file ins steps <<<"$m"
    "$dlcc" compile "$tmp/f32_$file" -o "$tmp/f32_$name.so"
    "$dlcc" compile "$tmp/bf16_$file" -o "$tmp/bf16_$name.so"
    arts=("f32_$name.so" "bf16_$name.so")
    if [ $amx = yes ]; then
        "$dlcc" compile "$tmp/bf16_$file" --features "$noamx" -o "$tmp/bf16v_$name.so"
        arts+=("bf16v_$name.so")
    fi
    for t in 1 2; do
        declare -A runs=()
        for a in "${arts[@]}"; do mean_ms "$a" "$ins" 2 "$t" >/dev/null; done # warm
        for ((i = 0; i < repeat; i++)); do
            for a in "${arts[@]}"; do runs[$a]="${runs[$a]:-} $(mean_ms "$a" "$ins" "$steps" "$t")"; done
        done
        b32=$(best "${runs[f32_$name.so]}")
        b16=$(best "${runs[bf16_$name.so]}")
        if [ $amx = yes ]; then
            bv=$(best "${runs[bf16v_$name.so]}")
            printf '%-12s %7s %12.3f %14.3f %8.2fx %16.3f %8.2fx\n' "$name" "$t" "$b32" "$b16" \
                "$(/usr/bin/python3 -c "print($b32 / $b16)")" "$bv" \
                "$(/usr/bin/python3 -c "print($b32 / $bv)")"
        else
            printf '%-12s %7s %12.3f %14.3f %8.2fx\n' "$name" "$t" "$b32" "$b16" \
                "$(/usr/bin/python3 -c "print($b32 / $b16)")"
        fi
        unset runs
    done
done
