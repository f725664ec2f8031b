#!/usr/bin/env bash
# tools/test.sh — installs dependencies (with the test-only ones: tools/setup.sh --test), builds
# and runs every test. This is the README's test command and what CI runs (.ci/run). Stages:
#   1. gcc, RelWithDebInfo, -Werror: the whole ctest suite;
#   2. clang-19 with AddressSanitizer + UndefinedBehaviorSanitizer, -Werror, at -O1 (the
#      sanitizers' advice: the suite runs ~20 % faster than at -O0, and stack frames stay
#      precise): the whole suite again;
#   3. every libFuzzer target (clang-19), each run for DL_FUZZ_SECONDS (default 10).
# Ends with one line "N passed, N failed" over all stages.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc 2>/dev/null || echo 2)

bash tools/setup.sh --test || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-2G}

passed=0
failed=0
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

# Adds the counts from a ctest log ("NN% tests passed, F tests failed out of T").
count_ctest() {
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" | tail -1)
  if [ -z "$line" ]; then
    failed=$((failed + 1))
    return
  fi
  local f t
  f=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  t=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
  passed=$((passed + t - f))
  failed=$((failed + f))
}

stage() { echo; echo "==== $* ===="; }

# 1. gcc build, full suite.
stage "gcc build (RelWithDebInfo, -Werror)"
if cmake -S . -B build-ci -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDL_WERROR=ON \
     -DCMAKE_C_COMPILER=gcc >"$logdir/cfg1" 2>&1 && ninja -C build-ci -j "$jobs"; then
  stage "tests (gcc)"
  ctest --test-dir build-ci --output-on-failure -j "$jobs" 2>&1 | tee "$logdir/t1"
  count_ctest "$logdir/t1"
else
  cat "$logdir/cfg1"; echo "gcc build failed"; failed=$((failed + 1))
fi

# 2. clang-19 + ASan + UBSan, full suite (and the fuzz target, built in the same tree).
stage "clang-19 build (ASan + UBSan, -Werror)"
if cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" \
     -DDL_WERROR=ON \
     -DCMAKE_C_COMPILER=clang-19 -DDL_SANITIZE='address;undefined' -DDL_FUZZ=ON \
     >"$logdir/cfg2" 2>&1 && ninja -C build-asan -j "$jobs"; then
  stage "tests (ASan + UBSan)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" 2>&1 | tee "$logdir/t2"
  count_ctest "$logdir/t2"

  # 3. Every input surface fuzzed briefly from its seed corpus (never crash, leak, hang or blow
  #    up): the .dlg parser, the ONNX importer, the .npy and safetensors readers, the cache store
  #    opening a hostile database, the artifact's plan validator. DL_FUZZ_SECONDS per target
  #    (default 10); the corpora are copied so the tree never grows. The seed is fixed
  #    (DL_FUZZ_SEED, default 1) so a CI run explores the same inputs each time and a failure
  #    reproduces; a fuzzing campaign (tests/fuzz/tests.cmake) passes its own seeds and time.
  for spec in fuzz_parse:tests/fuzz/corpus:tests/fuzz/dlg.dict \
              fuzz_onnx:tests/fuzz/corpus_onnx:tests/fuzz/onnx.dict \
              fuzz_npy:tests/fuzz/corpus_npy: \
              fuzz_safetensors:tests/fuzz/corpus_safetensors: \
              fuzz_store:tests/fuzz/corpus_store: \
              fuzz_artifact:tests/fuzz_artifact/corpus:; do
    IFS=: read -r name corpus dict <<<"$spec"
    fuzz=$(find build-asan -name "$name" -type f -perm -u+x | head -1)
    secs=${DL_FUZZ_SECONDS:-10}
    stage "$name for $secs s"
    if [ -z "$fuzz" ]; then
      echo "$name: not built"; failed=$((failed + 1)); continue
    fi
    work=$(mktemp -d)
    cp -r "$corpus"/. "$work"/ 2>/dev/null || true
    dflag=()
    [ -n "$dict" ] && dflag=(-dict="$root/$dict")
    # TMPDIR in memory: the store target's SQLite fsyncs are ~6x slower on disk.
    ftmp=/tmp
    [ -d /dev/shm ] && [ -w /dev/shm ] && ftmp=/dev/shm
    if (cd "$logdir" && TMPDIR=$ftmp "$root/$fuzz" -max_total_time="$secs" -timeout=10 \
          -seed="${DL_FUZZ_SEED:-1}" \
          -rss_limit_mb=2048 -print_final_stats=1 "${dflag[@]}" "$work" >"$logdir/$name" 2>&1); then
      grep -E '^stat::number_of_executed_units' "$logdir/$name" | sed "s/^/$name: /"
      echo "$name: ok"; passed=$((passed + 1))
    else
      tail -40 "$logdir/$name"; echo "$name: FAILED"; failed=$((failed + 1))
    fi
    rm -rf "$work"
  done
else
  cat "$logdir/cfg2"; echo "sanitizer build failed"; failed=$((failed + 1))
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
