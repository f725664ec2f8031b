#!/usr/bin/env bash
# tools/setup.sh — installs everything dlcc needs from Debian 12's archive. Non-interactive and
# idempotent: when every package is already installed it touches nothing.
# usage: setup.sh [--test]. --test (tools/test.sh passes it) adds the packages that only tests
# use (TEST_PKGS below); the main job (tools/main-job.sh) does not need them.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build ccache pkg-config git
  clang-19 lld-19 libclang-rt-19-dev llvm-19-dev   # LLVM C API (pinned 19), libFuzzer
  libzstd-dev                                       # LLVM static libraries need it
  zlib1g-dev                                        # gzip-compressed IDX datasets
  dataset-fashion-mnist                             # Fashion-MNIST (IDX files) for training
  clang-format-19                                   # formatting check
  libsqlite3-dev libxxhash-dev                      # cache store and keys
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev # ONNX protobuf (onnx.proto from libonnx-dev)
  libonnx-testdata                                  # ONNX node conformance data
  python3 python3-numpy python3-onnx                # test helpers (.npy fixtures, ONNX models)
  python3-venv python3-pip python3-setuptools python3-wheel  # pip install ./python (tests/install)
  python3-torch                                     # PyTorch parity tests (tests/parity)
  libopenblas-dev                                   # GEMM baseline for bench/ (not linked by dlcc)
  libopenmpi-dev openmpi-bin                        # data-parallel training (libdlrt_mpi.so, mpirun)
  python3-mpi4py                                    # MPI communicators passed to the Python binding
)

# Only the test suite needs these (all --no-install-recommends, as everything here).
TEST_PKGS=(
  groff-base mandoc          # man_pages_render: man/ rendered by groff -ww, linted by mandoc -Tlint
  chromium-headless-shell    # train_cli_plot_render: dlcc plot's SVG screenshot in headless Chromium
)                            # (with 29 dependencies: ~100 MB download, ~295 MiB; docs/training.md)

case "${1:-}" in
  "") ;;
  --test) PKGS+=("${TEST_PKGS[@]}") ;;
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
