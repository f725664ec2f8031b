# IR printer, canonical form and verifier (tests/ir/).
add_executable(test_ir ${CMAKE_CURRENT_LIST_DIR}/test_ir.c)
target_link_libraries(test_ir PRIVATE dl_flags dl_ir dl_test_harness)
add_test(NAME ir_unit COMMAND test_ir)
set_tests_properties(ir_unit PROPERTIES LABELS unit)

# parse -> print -> parse -> print over every .dlg file of the source tree.
add_executable(test_ir_roundtrip ${CMAKE_CURRENT_LIST_DIR}/test_roundtrip.c)
target_link_libraries(test_ir_roundtrip PRIVATE dl_flags dl_frontend dl_ir dl_test_harness)
target_compile_definitions(test_ir_roundtrip PRIVATE DL_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME ir_roundtrip COMMAND test_ir_roundtrip)
set_tests_properties(ir_roundtrip PROPERTIES LABELS unit)

# The op table's columns (ir/ir_ops.def) against each other.
add_executable(test_op_table ${CMAKE_CURRENT_LIST_DIR}/test_op_table.c)
target_link_libraries(test_op_table PRIVATE dl_flags dl_ir dl_test_harness)
add_test(NAME ir_op_table COMMAND test_op_table)
set_tests_properties(ir_op_table PROPERTIES LABELS unit)
