# The compiled train step (codegen/lower_train.c, runtime/rt_train.c) against the double-precision
# reference optimizers: every optimizer variant, clipping, loss scaling, skipped steps, frozen
# params, hyper-parameters by name, checkpoints and forged plans.
add_executable(test_train_step ${CMAKE_CURRENT_LIST_DIR}/test_train_step.c)
target_link_libraries(test_train_step PRIVATE dl_flags dl_test_harness dlcc_lib dlrt)
target_include_directories(test_train_step PRIVATE ${CMAKE_SOURCE_DIR}/runtime ${CMAKE_SOURCE_DIR}/tests/runtime)
add_test(NAME train_step COMMAND test_train_step)
set_tests_properties(train_step PROPERTIES LABELS numeric)
# Any partition of a step kernel's range gives the same bytes.
add_test(NAME train_step_split COMMAND test_train_step)
set_tests_properties(train_step_split PROPERTIES LABELS numeric ENVIRONMENT DLRT_DEBUG_SPLIT=3)
# Sanitizer builds compile the steps at LLVM -O1 (DLCC_TEST_OPT, tests/codegen/cg_check.h).
if(DL_SANITIZE)
  set_property(TEST train_step train_step_split APPEND PROPERTY ENVIRONMENT DLCC_TEST_OPT=1)
endif()
