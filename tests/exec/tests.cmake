# The threaded executor and the profiler (runtime/rt_exec.c, runtime/rt_profile.c).
# Bit-identical params and outputs at 1, 2, 8 threads (1000 MLP steps) and 1 vs 3 threads (the
# CNN and transformer samples), thread-count errors, the profiler API.
add_executable(test_exec ${CMAKE_CURRENT_LIST_DIR}/test_exec.c)
target_link_libraries(test_exec PRIVATE dl_flags dl_test_harness dlcc_lib dlrt)
target_include_directories(test_exec PRIVATE ${CMAKE_SOURCE_DIR}/runtime ${CMAKE_SOURCE_DIR}/driver)
target_compile_definitions(test_exec PRIVATE DL_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME exec_identical COMMAND test_exec)
set_tests_properties(exec_identical PROPERTIES LABELS numeric TIMEOUT 120)
# `dlcc run/train --threads`, --profile (the JSON parsed by Python), --profile-summary, -v.
add_test(NAME exec_cli
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_cli.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(exec_cli PROPERTIES LABELS numeric TIMEOUT 120)
