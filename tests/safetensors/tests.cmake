# Unit tests for base/safetensors.c (dl_st_*): writer bytes, round trips, a python (json + struct
# + numpy, no safetensors package) cross-check both ways, malformed files, atomic writes.
add_executable(test_safetensors ${CMAKE_CURRENT_LIST_DIR}/test_safetensors.c)
target_link_libraries(test_safetensors PRIVATE dl_base dl_test_harness dl_flags)
target_compile_definitions(test_safetensors PRIVATE
  ST_PY_SCRIPT="${CMAKE_CURRENT_LIST_DIR}/st_crosscheck.py" ST_PYTHON="/usr/bin/python3")
add_test(NAME safetensors_unit COMMAND test_safetensors)
set_tests_properties(safetensors_unit PROPERTIES LABELS unit TIMEOUT 60)
