add_test(NAME clang_format COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_format.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(clang_format PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
