# libdlrt's CUDA device (runtime/rt_device_cuda.c) without a GPU: a mock driver (mock_cuda.c,
# host memory, launches checked and counted, nothing run) loaded through DLRT_LIBCUDA. What runs
# the kernels is tools/gpu-check.sh's, on a GPU machine.
add_library(mockcuda SHARED ${CMAKE_CURRENT_LIST_DIR}/mock_cuda.c)
target_compile_options(mockcuda PRIVATE -fvisibility=hidden)
add_executable(test_cuda_mock ${CMAKE_CURRENT_LIST_DIR}/test_cuda_mock.c)
target_link_libraries(test_cuda_mock PRIVATE dl_flags dl_test_harness dlcc_lib dlrt ${CMAKE_DL_LIBS})
target_include_directories(test_cuda_mock PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
add_dependencies(test_cuda_mock mockcuda)
add_test(NAME cuda_mock_device
         COMMAND test_cuda_mock ${CMAKE_SOURCE_DIR}/samples/mlp_fmnist.dlg $<TARGET_FILE:mockcuda>)
set_tests_properties(cuda_mock_device PROPERTIES LABELS unit)
# The replay runner of tools/gpu-check.sh (libdlrt and the base library only: it runs on a GPU
# machine without LLVM), tested here on CPU exports of codegen cases: the codegen suite writes
# each case (artifact, inputs, the reference's outputs) to a directory and the runner replays
# them all. A third of the suite, the families that between them export every kind of input and
# output the runner reads (float32, float16, bfloat16, int32, int64 and bool values, scalars,
# empty tensors, several outputs, NaN payloads): the runner is what is tested, and the whole
# suite took 137 s of CI's time.
add_executable(gpu_replay ${CMAKE_CURRENT_LIST_DIR}/gpu_replay.c)
target_link_libraries(gpu_replay PRIVATE dl_flags dl_base dlrt m)
if(NOT DL_SANITIZE) # a second pass of codegen cases: once is enough under sanitizers
add_test(NAME gpu_replay_cpu
         COMMAND sh -c "rm -rf replay-cpu && mkdir replay-cpu && DLCC_TEST_EXPORT=replay-cpu \"$1\" shape nan reduce loss integer half gemm unary empty bool >/dev/null && \"$2\" replay-cpu && rm -rf replay-cpu"
                 sh $<TARGET_FILE:test_codegen> $<TARGET_FILE:gpu_replay>)
set_tests_properties(gpu_replay_cpu PROPERTIES LABELS numeric
                     WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
endif()
# The Python binding on a CUDA session (mock driver): copies in and out, no views of GPU memory,
# params and checkpoints shared with the CPU. Not in sanitizer builds (python3 cannot load an
# ASan libdlrt).
if(NOT DL_SANITIZE)
  add_test(NAME cuda_mock_python
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_cuda_python.py
                   ${CMAKE_SOURCE_DIR}/samples/mlp_fmnist.dlg)
  set_tests_properties(cuda_mock_python PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT
    "DLCC_EXE=$<TARGET_FILE:dlcc>;DLRT_LIBRARY=$<TARGET_FILE:dlrt>;DLRT_LIBCUDA=$<TARGET_FILE:mockcuda>")
endif()
# `dlcc run` of a CUDA artifact: with the mock driver it runs and prints its outputs (read back
# by copy; the kernels do not execute there, so they are zeros); without a driver it exits 1
# naming the missing libcuda.so.1.
add_test(NAME cuda_mock_cli
         COMMAND sh -c "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT
\"$1\" compile \"$3\" --target cuda:sm_80 --no-cache -o $d/g.so
/usr/bin/python3 -c \"import numpy as n; n.save('$d/x.npy', n.zeros((128, 784), n.float32)); n.save('$d/y.npy', n.zeros(128, n.int64))\"
DLRT_LIBCUDA=\"$2\" \"$1\" run $d/g.so --in x=$d/x.npy --in y=$d/y.npy | grep -q 'probs: float.128, 10.'
if DLRT_LIBCUDA=/nonexistent/libcuda.so.1 \"$1\" run $d/g.so --in x=$d/x.npy --in y=$d/y.npy 2>$d/err; then exit 1; fi
grep -q 'needs a CUDA GPU: no CUDA driver' $d/err"
                 sh $<TARGET_FILE:dlcc> $<TARGET_FILE:mockcuda> ${CMAKE_SOURCE_DIR}/samples/mlp_fmnist.dlg)
set_tests_properties(cuda_mock_cli PROPERTIES LABELS unit)
