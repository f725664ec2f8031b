#!/usr/bin/env bash
# tests/install/test_install.sh — dlcc installed as a user installs it, then used from outside
# the tree: `cmake --install BUILD --prefix P`; the files; each public header compiling alone;
# the libraries exporting only their API; the installed tools running with no environment
# (RUNPATH); the manual pages found by man; samples/train_fmnist.c built outside the tree with
# pkg-config and with find_package(dlcc); the installed Python package finding its libraries by
# itself, from the prefix and from `pip install ./python` in a venv.
# usage: test_install.sh BUILD_DIR SOURCE_DIR
set -u
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
prog=/bin/true
source "$src/tests/harness/cli_lib.sh"
p=$work/prefix
lib=$p/lib
clean_env=(env -i PATH=/usr/bin:/bin HOME="$work" DLCC_CACHE_DIR="$work/cache" TMPDIR="$work/tmp")

run_cmd() { "$@" >"$out" 2>"$err"; rc=$?; }
ok_cmd() { # ok_cmd NAME COMMAND...: the command exits 0
  local name=$1
  shift
  run_cmd "$@"
  if [ "$rc" -eq 0 ]; then pass "$name"; else echo "  exit $rc"; fail "$name"; fi
}

ok_cmd "cmake --install to a fresh prefix" cmake --install "$build" --prefix "$p"
for f in bin/dlcc bin/dlcc-cache include/dlrt.h include/libdlcc.h lib/libdlrt.so lib/libdlcc.so \
         lib/pkgconfig/dlrt.pc lib/pkgconfig/dlcc.pc lib/cmake/dlcc/dlccConfig.cmake \
         lib/cmake/dlcc/dlccConfigVersion.cmake lib/python3/dist-packages/dlcc/__init__.py \
         share/doc/dlcc/samples/train_fmnist.c share/doc/dlcc/runtime.md; do
  check "installed: $f" test -e "$p/$f"
done
if [ -e "$build/libdlrt_mpi.so" ]; then
  check "installed: lib/libdlrt_mpi.so (the MPI plugin, beside libdlrt)" test -e "$lib/libdlrt_mpi.so"
fi
check "libdlrt has a versioned soname" sh -c "objdump -p '$lib/libdlrt.so' | grep -q 'SONAME.*libdlrt\.so\.0'"
check "libdlcc has a versioned soname" sh -c "objdump -p '$lib/libdlcc.so' | grep -q 'SONAME.*libdlcc\.so\.0'"
check "libdlrt exports dlrt_* only" sh -c \
  "! nm -D --defined-only '$lib/libdlrt.so' | awk '{print \$3}' | grep -v '^dlrt_' | grep -q ."
check "libdlcc exports dlcc_lib_* only (LLVM and the compiler hidden)" sh -c \
  "! nm -D --defined-only '$lib/libdlcc.so' | awk '{print \$3}' | grep -v '^dlcc_lib_' | grep -q ."
for h in dlrt.h libdlcc.h; do
  printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"hdr_${h%.h}.c"
  ok_cmd "$h compiles on its own (C11, -Wall -Wextra -Werror)" \
    cc -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$p/include" -c "hdr_${h%.h}.c" -o /dev/null
done

# The manual pages, in P/share/man/manN: man-db finds them there for a user with P/bin on PATH
# (it looks beside each PATH directory) and renders them; without man-db, groff renders them.
# tests/man checks their contents.
for f in share/man/man1/dlcc.1 share/man/man1/dlcc-cache.1 share/man/man5/dlcc-graph.5; do
  check "installed: $f" test -s "$p/$f"
done
if command -v man >/dev/null 2>&1; then
  for pg in "1 dlcc" "1 dlcc-cache" "5 dlcc-graph"; do
    read -r sec name <<<"$pg"
    ok_cmd "man -w $sec $name, P/bin on PATH, finds the installed page" \
      env -u MANPATH PATH="$p/bin:/usr/bin:/bin" man -w "$sec" "$name"
    check "... P/share/man/man$sec/$name.$sec" grep -qxF "$p/share/man/man$sec/$name.$sec" "$out"
    ok_cmd "man -l renders $name($sec)" env -u MANPATH MANWIDTH=80 LC_ALL=C.UTF-8 \
      man -l "$p/share/man/man$sec/$name.$sec"
    check "... its NAME line" grep -qE "^ +$name - [a-z]" "$out"
  done
  env -u MANPATH MANWIDTH=80 LC_ALL=C.UTF-8 man -l "$p/share/man/man1/dlcc.1" >dlcc.txt 2>&1
  missing=""
  for c in check fmt compile run train plot explain import; do
    grep -qE "^ +dlcc $c\$" dlcc.txt || missing+=" $c"
  done
  check "... dlcc(1) has a subsection for each command${missing:+ (missing:$missing)}" \
    test -z "$missing"
elif command -v groff >/dev/null 2>&1; then
  for f in man1/dlcc.1 man1/dlcc-cache.1 man5/dlcc-graph.5; do
    ok_cmd "groff renders the installed $f" groff -man -Tutf8 "$p/share/man/$f"
    check "... its NAME line" grep -qE "^ +$(basename "${f%.*}") - [a-z]" "$out"
  done
else
  echo "skip: rendering the installed manual pages (neither man nor groff is installed)"
fi

# The installed tools, with no environment: they find libdlrt through their RUNPATH.
ok_cmd "installed dlcc --version, empty environment" "${clean_env[@]}" "$p/bin/dlcc" --version
ok_cmd "installed dlcc compiles a sample" "${clean_env[@]}" "$p/bin/dlcc" compile \
  "$p/share/doc/dlcc/samples/mlp_fmnist.dlg" -o mlp.so
ok_cmd "installed dlcc-cache ls sees that entry" "${clean_env[@]}" "$p/bin/dlcc-cache" ls
check "... one entry" grep -q mlp_fmnist "$out"

# The C trainer sample, outside the tree: pkg-config, then CMake's find_package.
mkdir -p "$work/tmp" out_pc out_cmake
cp "$p/share/doc/dlcc/samples/train_fmnist.c" out_pc/
export PKG_CONFIG_PATH=$lib/pkgconfig
ok_cmd "pkg-config knows dlcc and dlrt" pkg-config --exists --print-errors dlcc dlrt
# shellcheck disable=SC2046
ok_cmd "train_fmnist.c builds with pkg-config" cc -std=c17 -D_POSIX_C_SOURCE=200809L -Wall -Werror \
  out_pc/train_fmnist.c $(pkg-config --cflags --libs dlcc dlrt) -Wl,-rpath,"$lib" -lm -o out_pc/t
run_cmd out_pc/t --frob
check "... and runs (a usage error for an unknown flag, exit 2)" test "$rc" -eq 2
cp out_pc/train_fmnist.c out_cmake/
cat >out_cmake/CMakeLists.txt <<'CMEOF'
cmake_minimum_required(VERSION 3.25)
project(outside C)
find_package(dlcc 0.1 REQUIRED)
add_executable(t train_fmnist.c)
target_compile_definitions(t PRIVATE _POSIX_C_SOURCE=200809L)
target_link_libraries(t PRIVATE dlcc::dlcc dlcc::dlrt m)
CMEOF
ok_cmd "find_package(dlcc) configures" cmake -S out_cmake -B out_cmake/b -G Ninja \
  -DCMAKE_PREFIX_PATH="$p"
ok_cmd "... and builds train_fmnist.c" cmake --build out_cmake/b
if [ -d /usr/share/datasets/fashion-mnist ]; then
  ok_cmd "the out-of-tree trainer trains one short epoch" "${clean_env[@]}" out_cmake/b/t \
    "$p/share/doc/dlcc/samples/mlp_fmnist.dlg" --epochs 1 --batch 64 --limit-train 1024 \
    --limit-test 500
  check "... and reports its test accuracy" grep -qE "^test accuracy: 0\.[0-9]{4} \([0-9]+/500\)$" "$out"
else
  echo "skip: the out-of-tree training run (dataset-fashion-mnist is not installed)"
fi

# The installed Python package: no DLCC_BUILD_DIR, no LD_LIBRARY_PATH; PYTHONPATH only because
# this prefix is not the system's (/usr/local's dist-packages is on python3's path already).
cat >use.py <<'PYEOF'
import sys
import numpy as np
import dlcc
assert dlcc.__file__.startswith(sys.argv[1]), dlcc.__file__
m = dlcc.compile(sys.argv[2], dims={"N": 4})
s = m.session(threads=1)
x = np.zeros((4, 784), np.float32)
y = np.zeros(4, np.int64)
print("loss", s.train_step(x=x, y=y).loss)
PYEOF
ok_cmd "the installed Python package compiles and trains, finding its own libraries" \
  "${clean_env[@]}" PYTHONPATH="$lib/python3/dist-packages" /usr/bin/python3 use.py "$p" \
  "$p/share/doc/dlcc/samples/mlp_fmnist.dlg"
check "... a loss" grep -qE "^loss [0-9.]+" "$out"

# `pip install ./python` with the system python3 and Debian's NumPy, offline, in a venv that sees
# the system's packages (Debian 12's pip refuses system installs, PEP 668); from a copy of
# python/ outside the tree, told the prefix by DLCC_PREFIX. The installed package then finds its
# libraries with no PYTHONPATH, LD_LIBRARY_PATH or DLCC_* variable.
if /usr/bin/python3 -c 'import venv, ensurepip, setuptools, wheel' 2>/dev/null; then
  cp -r "$src/python" pysrc
  rm -rf pysrc/build pysrc/*.egg-info
  ok_cmd "python3 -m venv --system-site-packages" /usr/bin/python3 -m venv --system-site-packages venv
  penv=(env -i PATH=/usr/bin:/bin HOME="$work" TMPDIR="$work/tmp")
  pip=(venv/bin/pip install --no-build-isolation --no-index --no-cache-dir)
  run_cmd "${penv[@]}" PKG_CONFIG_LIBDIR="$work/none" "${pip[@]}" ./pysrc
  check "pip install without a prefix to take the libraries from fails" test "$rc" -ne 0
  check "... saying what to do" grep -qF "Build dlcc and install it (cmake --install build --prefix P), then run DLCC_PREFIX=P pip install ./python" "$out" "$err"
  ok_cmd "DLCC_PREFIX=P pip install ./python (offline, Debian's setuptools and NumPy)" \
    "${penv[@]}" DLCC_PREFIX="$p" "${pip[@]}" ./pysrc
  check "... records P/lib" grep -qxF "LIBDIR = '$lib'" venv/lib/python3*/site-packages/dlcc/_libdir.py
  ok_cmd "pip show dlcc" venv/bin/pip show dlcc
  check "... the version is the CMake project's" grep -qx "Version: $(sed -n 's/^project(dlcc VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")" "$out"
  rm -rf pysrc
  ok_cmd "the pip-installed package compiles and trains, empty environment" \
    "${clean_env[@]}" venv/bin/python use.py "$work/venv" "$p/share/doc/dlcc/samples/mlp_fmnist.dlg"
  check "... a loss" grep -qE "^loss [0-9.]+" "$out"
else
  echo "skip: pip install ./python (python3-venv, python3-pip, python3-setuptools or python3-wheel missing)"
fi
finish
