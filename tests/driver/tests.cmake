# The compile-or-fetch driver (driver/dlcc.h) and dlrt_model_load_cached: key stability and
# sensitivity, cache hit/miss, --no-cache, unusable caches, loading by key. Every test uses a
# private cache directory (DLCC_CACHE_DIR is set to a temporary directory too).
add_executable(test_driver ${CMAKE_CURRENT_LIST_DIR}/test_driver.c)
target_link_libraries(test_driver PRIVATE dl_flags dl_test_harness dlcc_lib dlrt)
add_test(NAME driver_unit COMMAND test_driver)
set_tests_properties(driver_unit PROPERTIES LABELS unit)
# `dlcc compile/run` with the cache: -v hit/miss lines, damaged and unusable caches, --no-cache.
add_test(NAME driver_cli
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_driver_cli.sh $<TARGET_FILE:dlcc>
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(driver_cli PROPERTIES LABELS unit)
# 8 processes x 20 compiles of 4 graphs on one fresh cache: no failure, 4 entries, integrity.
add_test(NAME driver_cache_stress
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_stress.sh $<TARGET_FILE:dlcc>)
set_tests_properties(driver_cache_stress PROPERTIES LABELS slow TIMEOUT 120)
