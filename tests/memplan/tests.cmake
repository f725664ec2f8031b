# The memory plan (passes/memplan.c, run by codegen): liveness-based arena offsets checked on the plan bytes of
# every sample and of randomised graphs (no two live buffers overlap, dependencies order every
# pair of kernels on overlapping memory), poisoned intermediates, the arena against the sum of
# the buffer sizes, determinism.
add_executable(test_memplan ${CMAKE_CURRENT_LIST_DIR}/test_memplan.c
                            ${CMAKE_SOURCE_DIR}/tests/codegen/cg_check.c
                            ${CMAKE_SOURCE_DIR}/tests/codegen/ptxas_run.c)
target_link_libraries(test_memplan PRIVATE dl_flags dl_test_harness dlcc_lib dlrt)
target_include_directories(test_memplan PRIVATE ${CMAKE_SOURCE_DIR}/runtime
                                                ${CMAKE_SOURCE_DIR}/tests/codegen
                                                ${CMAKE_SOURCE_DIR}/driver)
target_compile_definitions(test_memplan PRIVATE SAMPLES_DIR="${CMAKE_SOURCE_DIR}/samples")
add_test(NAME memplan COMMAND test_memplan)
set_tests_properties(memplan PROPERTIES LABELS "unit;numeric")
# The planner itself (passes/memplan.c) on hand-made neutral descriptions: no codegen, no LLVM.
add_executable(test_memplan_pass ${CMAKE_CURRENT_LIST_DIR}/test_memplan_pass.c)
target_link_libraries(test_memplan_pass PRIVATE dl_passes dl_ir dl_base dl_flags dl_test_harness)
add_test(NAME memplan_pass COMMAND test_memplan_pass)
set_tests_properties(memplan_pass PROPERTIES LABELS unit)
