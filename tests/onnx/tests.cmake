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

# `dlcc import` never writes what `dlcc check` rejects: every model of the ONNX test data that the
# importer accepts (params and --consts) must print, parse back to the same text, infer shapes
# and verify. Exit 77 (skip) when the test data is not installed.
add_executable(onnx_import_check ${CMAKE_CURRENT_LIST_DIR}/import_check.c)
target_link_libraries(onnx_import_check PRIVATE dl_flags dl_frontend dl_passes dl_ir dl_base)
get_filename_component(DL_ONNX_DATA_ROOT "${DL_ONNX_NODE_DIR}" DIRECTORY)
target_compile_definitions(onnx_import_check PRIVATE DL_ONNX_DATA_ROOT="${DL_ONNX_DATA_ROOT}")
add_test(NAME onnx_import_check COMMAND onnx_import_check)
set_tests_properties(onnx_import_check PROPERTIES LABELS conformance SKIP_RETURN_CODE 77)

# `dlcc import` on hostile and awkward models (deep nesting, size bombs, a model check rejects,
# aliased BatchNorm statistics from a real torch.onnx.export when torch is installed).
add_test(NAME onnx_import_cli
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_import_cli.sh $<TARGET_FILE:dlcc>
                 ${CMAKE_SOURCE_DIR} ${DL_ONNX_NODE_DIR})
set_tests_properties(onnx_import_cli PROPERTIES LABELS unit TIMEOUT 300)

# What torch.onnx.export writes (PyTorch 1.13: TransformerEncoderLayer static and with a dynamic
# batch, ...) imports and computes what torch computes. Exit 77 (skip) without onnx.
add_test(NAME onnx_torch_export
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_torch_export.sh $<TARGET_FILE:dlcc>
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(onnx_torch_export PROPERTIES LABELS unit TIMEOUT 300 SKIP_RETURN_CODE 77)
