# The cpu backend against the reference evaluator: every op, several shapes and attributes.
# Each op family has its own tests/codegen/test_<family>.c; all link into one executable.
file(GLOB DL_CG_TEST_SRC CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.c)
add_executable(test_codegen ${DL_CG_TEST_SRC} ${CMAKE_CURRENT_LIST_DIR}/cg_check.c)
target_link_libraries(test_codegen PRIVATE dl_flags dl_test_harness dlcc_lib dlrt)
target_include_directories(test_codegen PRIVATE ${CMAKE_CURRENT_LIST_DIR})
add_test(NAME codegen_ops COMMAND test_codegen)
set_tests_properties(codegen_ops PROPERTIES LABELS numeric)
# The same cases with every kernel run as 3 uneven chunks, last first: any partition of a
# kernel's range must give the same bytes (the contract the threaded executor relies on).
add_test(NAME codegen_ops_split COMMAND test_codegen)
set_tests_properties(codegen_ops_split PROPERTIES LABELS numeric ENVIRONMENT DLRT_DEBUG_SPLIT=3)
