# libdlrt's CUDA device (runtime/rt_device_cuda.c) without a GPU: a mock driver (mock_cuda.c,
# host memory, launches checked and counted, nothing run) loaded through DLRT_LIBCUDA. What runs
# the kernels is tools/gpu-check.sh's, on a GPU machine.
add_library(mockcuda SHARED ${CMAKE_CURRENT_LIST_DIR}/mock_cuda.c)
target_compile_options(mockcuda PRIVATE -fvisibility=hidden)
add_executable(test_cuda_mock ${CMAKE_CURRENT_LIST_DIR}/test_cuda_mock.c)
target_link_libraries(test_cuda_mock PRIVATE dl_flags dlcc_lib dlrt ${CMAKE_DL_LIBS})
target_include_directories(test_cuda_mock PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
add_dependencies(test_cuda_mock mockcuda)
add_test(NAME cuda_mock_device
         COMMAND test_cuda_mock ${CMAKE_SOURCE_DIR}/samples/mlp_fmnist.dlg $<TARGET_FILE:mockcuda>)
set_tests_properties(cuda_mock_device PROPERTIES LABELS unit)
