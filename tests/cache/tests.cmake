# The compilation cache store (cache/dl_cache.h): unit tests (round trips, counting, listing,
# pruning with pins, size limit, trust checks, export/import, 8-process stress) and fault tests
# (damaged rows and files, unwritable places, full disk, locks). Each test uses a fresh
# temporary DLCC_CACHE_DIR, never the user's cache.
add_executable(test_cache_store ${CMAKE_CURRENT_LIST_DIR}/test_store.c)
target_link_libraries(test_cache_store PRIVATE dl_cache dl_base dl_test_harness dl_flags)
add_test(NAME cache_store_unit COMMAND test_cache_store)
set_tests_properties(cache_store_unit PROPERTIES LABELS unit TIMEOUT 60)

add_executable(test_cache_store_fault ${CMAKE_CURRENT_LIST_DIR}/test_store_fault.c)
target_link_libraries(test_cache_store_fault PRIVATE dl_cache dl_base dl_test_harness dl_flags)
add_test(NAME cache_store_fault COMMAND test_cache_store_fault)
set_tests_properties(cache_store_fault PROPERTIES LABELS fault TIMEOUT 60)

# The cache is never a way in: side files (-wal, -shm, -journal) under the trust rules, a forged
# WAL never replayed, import only of the caller's own files and never stopped by one bad file,
# hostile rows reported by verify, triggers in the database never run.
add_executable(test_cache_store_trust ${CMAKE_CURRENT_LIST_DIR}/test_store_trust.c)
target_link_libraries(test_cache_store_trust PRIVATE dl_cache dl_base dl_test_harness dl_flags)
add_test(NAME cache_store_trust COMMAND test_cache_store_trust)
set_tests_properties(cache_store_trust PROPERTIES LABELS unit TIMEOUT 60)

# The controls ccache users look for: read-only mode (DLCC_CACHE_READONLY, and automatic for an
# unwritable directory or database: the chmod cases run as uid 65534 when the test runs as root),
# DLCC_CACHE=0, zeroed statistics, 0 as no size limit, source/dims, the schema-1 upgrade.
add_executable(test_cache_store_controls ${CMAKE_CURRENT_LIST_DIR}/test_store_controls.c)
target_link_libraries(test_cache_store_controls PRIVATE dl_cache dl_base dl_test_harness dl_flags)
add_test(NAME cache_store_controls COMMAND test_cache_store_controls)
set_tests_properties(cache_store_controls PROPERTIES LABELS unit TIMEOUT 60)
