# Shape and type inference (passes/shape*.c).
add_executable(test_shape ${CMAKE_CURRENT_LIST_DIR}/test_shape.c)
target_link_libraries(test_shape PRIVATE dl_passes dl_ir dl_base dl_flags dl_test_harness)
add_test(NAME passes_shape COMMAND test_shape)
set_tests_properties(passes_shape PROPERTIES LABELS unit)
# simplify/CSE/DCE (passes/simplify.c) and the pipeline's pass names (passes/pipeline.c).
add_executable(test_simplify ${CMAKE_CURRENT_LIST_DIR}/test_simplify.c)
target_link_libraries(test_simplify PRIVATE dl_passes dl_frontend dl_ir dl_base dl_flags
                      dl_test_harness)
add_test(NAME passes_simplify COMMAND test_simplify)
set_tests_properties(passes_simplify PROPERTIES LABELS unit)
# dlcc compile --dump-after on every sample: every dump parses back (dlcc check --verify-each).
add_test(NAME passes_dump_after
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_dump_after.sh $<TARGET_FILE:dlcc>
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(passes_dump_after PROPERTIES LABELS unit)
