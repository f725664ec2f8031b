# Unit tests for base/: arena, buffers, diagnostics rendering, number formatting, files, half
# precision, RNG, host tensors (test_base.c) and .npy / safetensors I/O (test_tensor_io.c).
add_executable(test_base ${CMAKE_CURRENT_LIST_DIR}/test_base.c
                         ${CMAKE_CURRENT_LIST_DIR}/test_tensor_io.c)
target_link_libraries(test_base PRIVATE dl_base dl_test_harness dl_flags)
add_test(NAME base_unit COMMAND test_base)
set_tests_properties(base_unit PROPERTIES LABELS unit)
