# tests/dp — synchronous data-parallel training over MPI. dp_mpi: `mpirun -np 2 --oversubscribe`
# runs the small trainer test_dp.c on the MLP sample (bit-identical ranks and launches,
# equivalence with one process over the same global batch, accumulation, one process of 2 chunks
# bit-identical to 2 ranks (with accumulate = 3 too, call by call), a rank that exits, hangs or runs out of memory, a mismatched artifact
# or model). test_dp links only libdlrt: the runtime loads the MPI
# plugin.
add_executable(test_dp ${CMAKE_CURRENT_LIST_DIR}/test_dp.c)
target_link_libraries(test_dp PRIVATE dl_flags dlrt m)
add_test(NAME dp_mpi
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_dp.sh $<TARGET_FILE:dlcc> $<TARGET_FILE:test_dp>
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(dp_mpi PROPERTIES LABELS "unit;fault" TIMEOUT 300 SKIP_RETURN_CODE 77)
# The same across two "hosts": two network namespaces joined by a veth pair, one rank in each,
# Open MPI over TCP (the multi-host path). Needs root for `ip netns`: skipped (77) otherwise.
add_test(NAME dp_netns
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_dp_netns.sh $<TARGET_FILE:dlcc>
                 $<TARGET_FILE:test_dp> ${CMAKE_SOURCE_DIR})
set_tests_properties(dp_netns PROPERTIES LABELS "unit;fault" TIMEOUT 300 SKIP_RETURN_CODE 77)
# `mpirun -np 2 dlcc train` (--comm, auto-detected): sharded epochs, rank-0 output and checkpoint,
# equivalence with one process at twice the batch, resuming at another world size,
# --deterministic (byte for byte; with accumulation: checkpoints at cycle boundaries), one rank's non-finite loss stopping every rank at once.
add_test(NAME dp_cli
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_dp_cli.sh $<TARGET_FILE:dlcc>
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(dp_cli PROPERTIES LABELS slow TIMEOUT 300 SKIP_RETURN_CODE 77)
# The Python binding with mpi4py (not in sanitizer builds: python3 cannot load an ASan libdlrt,
# tests/python/tests.cmake).
if(NOT DL_SANITIZE)
  add_test(NAME dp_python
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_dp_python.sh ${CMAKE_BINARY_DIR}
                   ${CMAKE_SOURCE_DIR})
  set_tests_properties(dp_python PROPERTIES LABELS unit TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
# The C trainer sample (samples/train_fmnist.c --comm) under `mpirun -np 2`: sharded epochs,
# rank-0 output and checkpoint, equivalence with one process at twice the batch.
add_test(NAME dp_sample
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_dp_sample.sh $<TARGET_FILE:train_fmnist>
                 $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(dp_sample PROPERTIES LABELS slow TIMEOUT 300 SKIP_RETURN_CODE 77)
# Without MPI, under every sanitizer (LeakSanitizer too): a one-rank transport plugin
# (loop_plugin.c) drives the communicator and the bucketed step; results equal an unbound
# session's bit for bit; an injected failure is named and sticky.
add_library(dlrt_loop_plugin MODULE ${CMAKE_CURRENT_LIST_DIR}/loop_plugin.c)
target_include_directories(dlrt_loop_plugin PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
set_target_properties(dlrt_loop_plugin PROPERTIES C_VISIBILITY_PRESET hidden)
target_link_libraries(dlrt_loop_plugin PRIVATE dl_flags)
add_test(NAME dp_loop
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_dp_loop.sh $<TARGET_FILE:dlcc>
                 $<TARGET_FILE:test_dp> $<TARGET_FILE:dlrt_loop_plugin> ${CMAKE_SOURCE_DIR})
set_tests_properties(dp_loop PROPERTIES LABELS "unit;fault" TIMEOUT 300)
# Synchronised BatchNorm (sync_batchnorm = true, dlcc train --sync-bn) under `mpirun -np 2 dlcc
# train`: 2 ranks x 16 = 1 process x 32 within rounding (per-rank statistics differ: negative
# control), bit-identical launches and thread counts, with accumulation, --deterministic refused.
add_test(NAME dp_syncbn
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_dp_syncbn.sh $<TARGET_FILE:dlcc>
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(dp_syncbn PROPERTIES LABELS "unit" TIMEOUT 300 SKIP_RETURN_CODE 77)
