#!/usr/bin/env bash
# libdlrt must not link or contain LLVM: neither a NEEDED entry nor an LLVM symbol.
set -euo pipefail
lib=$1
if ldd "$lib" | grep -i llvm; then
  echo "FAIL: $lib links LLVM"; exit 1
fi
if nm -D "$lib" | grep -E ' (LLVM|_ZN4llvm)'; then
  echo "FAIL: $lib references LLVM symbols"; exit 1
fi
echo "ok: $lib has no LLVM dependency"
