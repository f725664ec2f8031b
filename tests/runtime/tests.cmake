# The runtime's dependency rules (STYLE.md 3.1), checked on the built library.
add_test(NAME runtime_no_llvm
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_no_llvm.sh $<TARGET_FILE:dlrt>)
add_test(NAME runtime_exports_only_dlrt
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_exports.sh $<TARGET_FILE:dlrt>)
set_tests_properties(runtime_no_llvm runtime_exports_only_dlrt PROPERTIES LABELS unit)

# libdlrt on artifacts compiled by dl_cg_compile: loading, introspection, param initialisation,
# infer against the reference evaluator, argument errors and corrupt artifacts.
add_executable(test_runtime ${CMAKE_CURRENT_LIST_DIR}/test_runtime.c)
target_link_libraries(test_runtime PRIVATE dl_flags dl_test_harness dlcc_lib dlrt)
target_compile_definitions(test_runtime PRIVATE DLRT_LIB_PATH="$<TARGET_FILE:dlrt>"
                                                 DL_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME runtime_unit COMMAND test_runtime)
set_tests_properties(runtime_unit PROPERTIES LABELS unit)

# The training loop's helpers (runtime/rt_trainloop.c) through the public API: schedules, the
# non-finite guard, the run plan, argument errors. The loop runs end to end in tests/train_cli.
add_executable(test_trainloop ${CMAKE_CURRENT_LIST_DIR}/test_trainloop.c)
target_link_libraries(test_trainloop PRIVATE dl_flags dl_test_harness dlrt m)
add_test(NAME runtime_trainloop COMMAND test_trainloop)
set_tests_properties(runtime_trainloop PROPERTIES LABELS unit)
