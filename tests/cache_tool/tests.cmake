# The dlcc-cache command line end to end: a cache built by `dlcc compile` in a fresh
# DLCC_CACHE_DIR, then every command (ls, stats, show, verify, prune, rm, clear, config,
# export/import, explain), --json output, damaged blobs and usage errors. Exits 77 (skipped) when
# `dlcc compile -v` does not mention the cache. Needs /usr/bin/python3 (json, sqlite3).
add_test(NAME cache_tool
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_cache_tool.sh $<TARGET_FILE:dlcc-cache>
                 $<TARGET_FILE:dlcc>)
set_tests_properties(cache_tool PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 120)
# dlcc-cache is a thin main over the cache store: no LLVM, no compiler modules (ldd, nm).
add_test(NAME cache_tool_no_llvm
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_no_llvm.sh $<TARGET_FILE:dlcc-cache>)
set_tests_properties(cache_tool_no_llvm PROPERTIES LABELS unit)
# DLCC_CACHE=0, DLCC_CACHE_READONLY=1 and a chmod-ed cache (dlcc compile -v says why), ls with
# source and dims, stats -z, -M 0 / max-size 0 as no limit.
add_test(NAME cache_controls
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_cache_controls.sh $<TARGET_FILE:dlcc-cache>
                 $<TARGET_FILE:dlcc>)
set_tests_properties(cache_controls PROPERTIES LABELS unit TIMEOUT 180)
