# libdlrt refuses to run an entry point on an input that was never given: infer and train_step
# name the first input they read that was neither set (copy) nor bound since the session was made.
add_executable(test_runtime_inputs ${CMAKE_CURRENT_LIST_DIR}/test_runtime_inputs.c)
target_link_libraries(test_runtime_inputs PRIVATE dl_flags dl_test_harness dlcc_lib dlrt)
add_test(NAME runtime_inputs_unit COMMAND test_runtime_inputs)
set_tests_properties(runtime_inputs_unit PROPERTIES LABELS unit)
