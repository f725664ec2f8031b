# The spec's own examples, and every sample, must pass `dlcc check`.
get_filename_component(DL_SHARED_DIR ${CMAKE_SOURCE_DIR}/../shared ABSOLUTE)
add_test(NAME spec_examples_check
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_spec_examples.sh $<TARGET_FILE:dlcc>
                 ${DL_SHARED_DIR}/spec/graph-format.md)
set_tests_properties(spec_examples_check PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
file(GLOB DL_SAMPLES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/samples/*.dlg)
add_test(NAME samples_check COMMAND dlcc check ${DL_SAMPLES})
set_tests_properties(samples_check PROPERTIES LABELS unit)
# Samples are the showcase of the canonical layout: `dlcc fmt` must leave them unchanged.
add_test(NAME samples_formatted COMMAND dlcc fmt --check ${DL_SAMPLES})
set_tests_properties(samples_formatted PROPERTIES LABELS unit)
