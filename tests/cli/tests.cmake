# End-to-end tests of the dlcc command line (exit codes, check/fmt/run/import, input validation,
# no partial output). Needs /usr/bin/python3 with numpy (and onnx for the import cases).
add_test(NAME cli_end_to_end
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_cli.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_end_to_end PROPERTIES LABELS unit)
# `dlcc compile` and running its artifacts: output paths, deterministic bytes, failed compiles
# that write nothing, usage errors, artifacts vs the reference evaluator, no temporary leftovers.
add_test(NAME cli_compile
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_compile.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR}
                 $<TARGET_FILE:dlrt>)
set_tests_properties(cli_compile PROPERTIES LABELS unit)
# The same end-to-end script with `dlcc run` on the compiled cpu backend.
add_test(NAME cli_end_to_end_cpu
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_cli.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_end_to_end_cpu PROPERTIES LABELS unit ENVIRONMENT DL_CLI_BACKEND=cpu)
# Inputs refused instead of hanging or allocating without bound: non-regular files (/dev/zero, a
# FIFO, a directory), the .dlg read limit, shapes and consts over the size limits, -D bounds.
add_test(NAME cli_limits
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_limits.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_limits PROPERTIES LABELS unit)
# Inference from a checkpoint without labels: `dlcc run --params CKPT --in x=...` after a few
# train steps, compiled against the reference evaluator within a float32 error bound.
add_test(NAME cli_run_params
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_run_params.sh $<TARGET_FILE:dlcc>)
set_tests_properties(cli_run_params PROPERTIES LABELS unit TIMEOUT 300)
