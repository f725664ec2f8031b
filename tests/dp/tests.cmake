# tests/dp — synchronous data-parallel training over MPI: `mpirun -np 2 --oversubscribe` runs the
# small trainer test_dp.c on the MLP sample (bit-identical ranks and launches, equivalence with one
# process over the same global batch, accumulation, a rank that exits or hangs, a mismatched
# artifact or model). test_dp links only libdlrt: the MPI plugin is loaded by the runtime.
add_executable(test_dp ${CMAKE_CURRENT_LIST_DIR}/test_dp.c)
target_link_libraries(test_dp PRIVATE dl_flags dlrt m)
add_test(NAME dp_mpi
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_dp.sh $<TARGET_FILE:dlcc> $<TARGET_FILE:test_dp>
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(dp_mpi PROPERTIES LABELS "unit;fault" TIMEOUT 300 SKIP_RETURN_CODE 77)
