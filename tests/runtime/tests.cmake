# The runtime's dependency rules (STYLE.md 3.1), checked on the built library.
add_test(NAME runtime_no_llvm
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_no_llvm.sh $<TARGET_FILE:dlrt>)
add_test(NAME runtime_exports_only_dlrt
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_exports.sh $<TARGET_FILE:dlrt>)
set_tests_properties(runtime_no_llvm runtime_exports_only_dlrt PROPERTIES LABELS unit)
