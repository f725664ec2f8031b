#!/usr/bin/env python3
"""bench/kernel_times.py — per-kernel times of artifacts compared on a noisy machine.

usage: kernel_times.py [--rounds R] [--steps S] [--top N] [--step-bench PATH]
                       A.so [B.so ...] -- train|infer THREADS NAME=POOL.npy...

Runs bench/step_bench.c (built by the caller: see bench/compare.sh for the command) on each
artifact in turn, R rounds alternating the artifacts, each run S timed steps after 2 warm-up
steps with DLRT_PROFILE set, and reads each run's Chrome trace. For every kernel (by its
profile name, e.g. "Conv+Relu r2") it keeps the smallest per-step time over the rounds: on a
host whose speed drifts, the minimum of alternating runs compares two builds where a single
run's total would not. Prints, per artifact, the minimum and median of the summed kernel time
per step and the N largest kernels. 2-thread times are summed over both threads.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile


def kernel_times(trace_path, steps):
    with open(trace_path) as f:
        trace = json.load(f)
    per = collections.Counter()
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and "begin" in e.get("args", {}):
            per[e["name"]] += e["dur"]
    return {k: v / steps / 1000.0 for k, v in per.items()}  # ms per step


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("kernel_times.py: expected ARTIFACT.so... -- train|infer THREADS NAME=POOL.npy...")
    cut = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--step-bench", default="./step_bench")
    ap.add_argument("artifacts", nargs="+")
    args = ap.parse_args(argv[:cut])
    rest = argv[cut + 1:]
    if len(rest) < 2 or rest[0] not in ("train", "infer"):
        sys.exit("kernel_times.py: after --: train|infer THREADS NAME=POOL.npy...")
    kind, threads, inputs = rest[0], rest[1], rest[2:]
    warm = 2
    best = {a: {} for a in args.artifacts}
    totals = {a: [] for a in args.artifacts}
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        for _ in range(args.rounds):
            for a in args.artifacts:
                env = dict(os.environ, DLRT_PROFILE=trace)
                cmd = [args.step_bench, a, kind, threads, str(args.steps), str(warm), *inputs]
                subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
                times = kernel_times(trace, args.steps + warm)  # the trace holds the warm-up too
                for k, v in times.items():
                    best[a][k] = min(best[a].get(k, v), v)
                totals[a].append(sum(times.values()))
    for a in args.artifacts:
        t = sorted(totals[a])
        print(f"== {a}: kernel time per step, min {t[0]:.3f} ms, median {t[len(t) // 2]:.3f} ms")
        for k, v in sorted(best[a].items(), key=lambda kv: -kv[1])[:args.top]:
            print(f"  {v:8.3f} ms  {k}")


if __name__ == "__main__":
    main()
