# Evaluator kernels of the internal gradient ops (ir/eval_grad.c) against central finite
# differences of their forward ops, in double through dl_ir__eval_node.
add_executable(test_eval_grad ${CMAKE_CURRENT_LIST_DIR}/test_eval_grad.c)
target_link_libraries(test_eval_grad PRIVATE dl_flags dl_frontend dl_passes dl_ir dl_base
                                             dl_test_harness)
add_test(NAME eval_grad_fd COMMAND test_eval_grad)
set_tests_properties(eval_grad_fd PROPERTIES LABELS numeric)
