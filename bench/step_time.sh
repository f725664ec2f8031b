#!/usr/bin/env bash
# bench/step_time.sh — the mean train step time of the samples at 1 and 2 threads, and the
# speed-up (the threaded executor, runtime/rt_exec.c). Results: docs/performance.md.
#
# usage: bash bench/step_time.sh [BUILD] [REPEAT]   (BUILD default: build; REPEAT default: 3)
#
# For each sample (the MLP at -D N=256, the CNN and the transformer block at their default dims)
# writes random inputs of the sample's shapes (python3 + numpy), then runs
# `BUILD/dlcc run SAMPLE --entry train_step --steps K --threads T -v` REPEAT times per thread
# count, alternating 1 and 2 threads, and keeps the best mean step time of each (the time inside
# dlrt_session_train_step, as -v prints it; compiling happens once, through a temporary cache).
# Other work on the machine inflates the times: look at the load average printed first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
repeat=${2:-3}
case $build in /*) ;; *) build=$root/$build ;; esac
if [ ! -f "$build/build.ninja" ]; then
    echo "step_time.sh: $build is not configured; run: cmake -S . -B $build -G Ninja" >&2
    exit 1
fi
ninja -C "$build" -j2 dlcc dlrt >/dev/null
dlcc=$build/dlcc
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlcc-steptime-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export DLCC_CACHE_DIR=$tmp/cache
unset DLRT_THREADS DLRT_PROFILE DLRT_DEBUG_SPLIT DLRT_SPLIT_BYTES

/usr/bin/python3 - "$tmp" <<'PYEOF'
import sys
import numpy as np
d = sys.argv[1]
r = np.random.default_rng(0)
def save(name, x, y):
    np.save(f"{d}/{name}_x.npy", x.astype(np.float32))
    np.save(f"{d}/{name}_y.npy", y.astype(np.int64))
save("mlp", r.standard_normal((256, 784)), r.integers(0, 10, 256))
save("cnn", r.standard_normal((64, 1, 28, 28)), r.integers(0, 10, 64))
save("tr", r.standard_normal((8, 16, 32)), r.integers(0, 10, 8))
PYEOF

# name  file  input-x input-y  steps  extra args
samples=(
    "mlp-N256 mlp_fmnist.dlg x y 200 -D N=256"
    "cnn cnn_fmnist.dlg img lbl 40"
    "transformer transformer_block.dlg x y 400"
)

# mean_ms NAME FILE X Y STEPS THREADS EXTRA...: one run's mean step time in ms.
mean_ms() {
    local name=$1 file=$2 x=$3 y=$4 steps=$5 threads=$6
    shift 6
    local short=${name%%-*}
    [ "$short" = transformer ] && short=tr
    "$dlcc" run "$root/samples/$file" "$@" --entry train_step --steps "$steps" \
        --in "$x=$tmp/${short}_x.npy" --in "$y=$tmp/${short}_y.npy" --threads "$threads" -v \
        2>&1 >/dev/null | sed -n 's/^dlcc: .* mean \([0-9.]*\) ms per step.*/\1/p'
}

echo "step_time.sh: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
    "best of $repeat runs"
printf '%-14s %8s %12s %12s %9s\n' sample steps "1 thread ms" "2 threads ms" speed-up
for s in "${samples[@]}"; do
    read -r name file x y steps extra <<<"$s"
    # shellcheck disable=SC2086
    mean_ms "$name" "$file" "$x" "$y" 2 1 $extra >/dev/null # compile once (cache)
    best1="" best2=""
    for ((i = 0; i < repeat; i++)); do
        # shellcheck disable=SC2086
        t1=$(mean_ms "$name" "$file" "$x" "$y" "$steps" 1 $extra)
        # shellcheck disable=SC2086
        t2=$(mean_ms "$name" "$file" "$x" "$y" "$steps" 2 $extra)
        best1=$(/usr/bin/python3 -c "print(min(x for x in [$t1, ${best1:-1e9}]))")
        best2=$(/usr/bin/python3 -c "print(min(x for x in [$t2, ${best2:-1e9}]))")
    done
    printf '%-14s %8s %12.3f %12.3f %8.2fx\n' "$name" "$steps" "$best1" "$best2" \
        "$(/usr/bin/python3 -c "print($best1 / $best2)")"
done
# The machine's own ceiling: two single-threaded MLP runs at once. On two real cores each
# takes about as long as alone; on two SMT siblings (or a time-shared VM) about twice as long.
read -r name file x y steps extra <<<"${samples[0]}"
# shellcheck disable=SC2086
alone=$(mean_ms "$name" "$file" "$x" "$y" "$steps" 1 $extra)
tmpf=$tmp/pair.txt
# shellcheck disable=SC2086
mean_ms "$name" "$file" "$x" "$y" "$steps" 1 $extra >"$tmpf" &
# shellcheck disable=SC2086
pair=$(mean_ms "$name" "$file" "$x" "$y" "$steps" 1 $extra)
wait
pair2=$(cat "$tmpf")
printf 'ceiling: %s at 1 thread alone %.3f ms, two processes at once %.3f / %.3f ms:' \
    "$name" "$alone" "$pair" "$pair2"
/usr/bin/python3 -c "print(' throughput %.2fx of one process' % (2 * $alone / max($pair, $pair2)))"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
