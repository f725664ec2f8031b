#!/usr/bin/env bash
# dlcc-cache links the cache store and base only: no LLVM (neither a NEEDED entry nor a symbol)
# and none of the compiler's modules (codegen, front end, passes, driver). The symbol table must
# hold the store's own functions, so a stripped binary cannot pass by showing nothing.
set -euo pipefail
exe=$1
if ldd "$exe" | grep -i llvm; then
  echo "FAIL: $exe links LLVM"; exit 1
fi
syms=$(nm "$exe")
if ! grep -q ' T dl_cache_open$' <<<"$syms"; then
  echo "FAIL: $exe has no symbol table to check (dl_cache_open not found)"; exit 1
fi
bad=$(grep -E ' (LLVM|_ZN4llvm|dl_cg_|dl_fe_|dl_pass_|dlcc_)' <<<"$syms" || true)
if [ -n "$bad" ]; then
  head -5 <<<"$bad"
  echo "FAIL: $exe contains LLVM or compiler symbols (first ones above)"; exit 1
fi
echo "ok: $exe has no LLVM and no compiler module"
