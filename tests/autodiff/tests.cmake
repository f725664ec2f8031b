# Autodiff (passes/autodiff.c): every differentiable op's gradient, as evaluated by the reference
# evaluator, against central finite differences in double; graph-level checks and errors.
add_executable(test_autodiff ${CMAKE_CURRENT_LIST_DIR}/test_grad_fd.c)
target_link_libraries(test_autodiff PRIVATE dl_flags dl_frontend dl_passes dl_ir dl_base
                      dl_test_harness)
add_test(NAME autodiff_fd COMMAND test_autodiff)
set_tests_properties(autodiff_fd PROPERTIES LABELS numeric)
