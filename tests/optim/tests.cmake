# The reference optimizer math (ir/dl_optim_ref.h): SGD / Adam / AdamW / RMSprop steps, global
# norm clipping and dynamic loss scaling against numbers computed independently in Python.
add_executable(test_optim ${CMAKE_CURRENT_LIST_DIR}/test_optim.c)
target_link_libraries(test_optim PRIVATE dl_flags dl_ir dl_test_harness m)
add_test(NAME optim_reference COMMAND test_optim)
set_tests_properties(optim_reference PROPERTIES LABELS numeric TIMEOUT 30)
