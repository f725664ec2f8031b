# Reference evaluator (ir/eval*.c): every op against hand-computed values, the initialisers and
# the input checks.
add_executable(test_eval ${CMAKE_CURRENT_LIST_DIR}/test_eval.c)
target_link_libraries(test_eval PRIVATE dl_flags dl_passes dl_ir dl_base dl_test_harness)
add_test(NAME eval_numeric COMMAND test_eval)
set_tests_properties(eval_numeric PROPERTIES LABELS numeric)
