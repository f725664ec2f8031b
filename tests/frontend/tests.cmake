# tests/frontend — the .dlg lexer/parser (unit).
add_executable(test_parser ${CMAKE_CURRENT_LIST_DIR}/test_parser.c)
target_link_libraries(test_parser PRIVATE dl_frontend dl_test_harness dl_flags)
target_compile_definitions(test_parser PRIVATE DL_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_test(NAME frontend_parser COMMAND test_parser)
set_tests_properties(frontend_parser PROPERTIES LABELS unit)
