# Shape and type inference (passes/shape*.c).
add_executable(test_shape ${CMAKE_CURRENT_LIST_DIR}/test_shape.c)
target_link_libraries(test_shape PRIVATE dl_passes dl_ir dl_base dl_flags dl_test_harness)
add_test(NAME passes_shape COMMAND test_shape)
set_tests_properties(passes_shape PROPERTIES LABELS unit)
