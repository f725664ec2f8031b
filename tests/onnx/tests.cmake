# ONNX importer unit tests and the ONNX node-conformance run (tests/onnx/).
set(DL_ONNX_NODE_DIR "/usr/share/libonnx-testdata/data/node" CACHE PATH
    "ONNX backend node tests (Debian libonnx-testdata)")

add_executable(test_onnx_import ${CMAKE_CURRENT_LIST_DIR}/test_import.c)
target_link_libraries(test_onnx_import PRIVATE dl_flags dl_frontend dl_ir dl_base dl_test_harness)
target_compile_definitions(test_onnx_import PRIVATE
  DL_ONNX_NODE_DIR="${DL_ONNX_NODE_DIR}" DL_ONNX_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")
add_test(NAME onnx_import COMMAND test_onnx_import)
set_tests_properties(onnx_import PROPERTIES LABELS unit)

# Every node test whose ops and dtypes are ours: import, print, parse, infer shapes, evaluate,
# compare. Exit 77 (skip) when the test data is not installed.
add_executable(onnx_conformance ${CMAKE_CURRENT_LIST_DIR}/conformance.c)
target_link_libraries(onnx_conformance PRIVATE dl_flags dlcc_lib dlrt)
target_compile_definitions(onnx_conformance PRIVATE
  DL_ONNX_NODE_DIR="${DL_ONNX_NODE_DIR}"
  DL_ONNX_EXCLUSIONS="${CMAKE_CURRENT_LIST_DIR}/exclusions.txt")
add_test(NAME onnx_conformance COMMAND onnx_conformance)
set_tests_properties(onnx_conformance PROPERTIES LABELS conformance SKIP_RETURN_CODE 77)

# The same cases through the cpu backend: compiled by dl_cg_compile, run through libdlrt, compared
# with the same tolerance. An op the backend does not lower yet fails its case.
add_test(NAME onnx_conformance_cpu COMMAND onnx_conformance --backend cpu)
set_tests_properties(onnx_conformance_cpu PROPERTIES LABELS conformance SKIP_RETURN_CODE 77)
