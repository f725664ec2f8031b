#!/usr/bin/env bash
# bench/trainers.sh — the time per epoch of the three trainers on the same model and data:
# `dlcc train`, the C sample samples/train_fmnist.c (build/train_fmnist) and the Python sample
# samples/train_fmnist.py, each training samples/mlp_fmnist.dlg (batch 128) on Fashion-MNIST for
# EPOCHS epochs at T step threads with 1 loader thread and 4 slots, all through one fresh
# compilation cache (so each is a cache hit after the first compile). Prints every epoch's time
# as each trainer reports it (the train-step loop, data waits included) and its test accuracy.
# Other work on the machine inflates the times: look at the load average printed first.
#
# usage: bash bench/trainers.sh [BUILD] [EPOCHS] [THREADS...]   (default: build 2 1 2)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
epochs=${2:-2}
shift $(($# > 2 ? 2 : $#)) || true
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(1 2)
case $build in /*) ;; *) build=$root/$build ;; esac
if [ ! -f "$build/build.ninja" ]; then
    echo "trainers.sh: $build is not configured; run: cmake -S . -B $build -G Ninja" >&2
    exit 1
fi
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
    echo "trainers.sh: Fashion-MNIST is missing (apt-get install dataset-fashion-mnist)" >&2
    exit 1
fi
ninja -C "$build" -j2 dlcc dlrt dlcc_shared train_fmnist >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlcc-trainers-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export DLCC_CACHE_DIR=$tmp/cache DLCC_BUILD_DIR=$build DLCC_LIBRARY=$build/libdlcc.so
export DLRT_LIBRARY=$build/libdlrt.so
unset DLRT_THREADS DLRT_PROFILE
model=$root/samples/mlp_fmnist.dlg
"$build/dlcc" compile "$model" -o "$tmp/warm.so" # fill the cache: every run below is a hit

# summary NAME FILE: "E1 s, E2 s, ... | accuracy" from a trainer's output.
summary() {
    local times acc
    times=$(sed -n 's/^epoch [0-9]*: mean loss [^,]*, \([0-9.]*\) s,.*/\1 s/p' "$2" | paste -sd, -)
    acc=$(sed -n 's/^test accuracy: \([0-9.]*\).*/\1/p' "$2")
    printf '  %-28s epochs: %-22s test accuracy %s\n' "$1" "$times" "$acc"
}

echo "trainers.sh: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
    "$epochs epochs of samples/mlp_fmnist.dlg, batch 128"
for t in "${threads[@]}"; do
    echo "$t step thread(s):"
    "$build/dlcc" train "$model" --dataset fashion-mnist --epochs "$epochs" --threads "$t" \
        --loader-threads 1 --prefetch 4 >"$tmp/cli.txt" 2>/dev/null
    summary "dlcc train" "$tmp/cli.txt"
    (cd "$root" && "$build/train_fmnist" "$model" --epochs "$epochs" --threads "$t" \
        --loader-threads 1 --prefetch 4) >"$tmp/c.txt" 2>/dev/null
    summary "samples/train_fmnist.c" "$tmp/c.txt"
    /usr/bin/python3 "$root/samples/train_fmnist.py" --model "$model" --epochs "$epochs" \
        --threads "$t" --loader-threads 1 --prefetch 4 >"$tmp/py.txt" 2>/dev/null
    summary "samples/train_fmnist.py" "$tmp/py.txt"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
