# The reference evaluator's NN gradient ops (ir/eval_grad_nn.c: ConvGradWeight, MaxPoolGrad,
# AveragePoolGrad, BatchNormalizationGrad) against finite differences of their forward ops.
add_executable(test_eval_grad_nn ${CMAKE_CURRENT_LIST_DIR}/test_eval_grad_nn.c)
target_link_libraries(test_eval_grad_nn PRIVATE dl_flags dl_frontend dl_passes dl_ir dl_base
                                                dl_test_harness)
add_test(NAME eval_grad_nn COMMAND test_eval_grad_nn)
set_tests_properties(eval_grad_nn PROPERTIES LABELS numeric)
