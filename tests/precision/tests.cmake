# The mixed-precision pass (passes/precision.c, docs/precision.md): structure of the rewritten
# module, its reference evaluator against its compiled artifact, bfloat16 train steps against
# float32 ones; and `dlcc train` of the MLP sample in bfloat16 on Fashion-MNIST (slow).
add_executable(test_precision ${CMAKE_CURRENT_LIST_DIR}/test_precision.c)
target_link_libraries(test_precision PRIVATE dl_flags dl_test_harness dlcc_lib dlrt)
add_test(NAME precision COMMAND test_precision)
set_tests_properties(precision PROPERTIES LABELS numeric)
add_test(NAME precision_fmnist
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_fmnist_bf16.sh $<TARGET_FILE:dlcc>
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(precision_fmnist PROPERTIES LABELS slow TIMEOUT 120)
