# Golden diagnostic tests: each tests/golden/errors/NAME.dlg names its dlcc command on its first
# line; run_golden.sh compares dlcc's stderr and exit code with NAME.expected.
# DL_UPDATE_GOLDEN=1 ctest -L golden rewrites the .expected files.
file(GLOB DL_GOLDEN_ERRORS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/errors/*.dlg)
foreach(dlg ${DL_GOLDEN_ERRORS})
  get_filename_component(name ${dlg} NAME_WE)
  add_test(NAME golden_errors_${name}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_golden.sh $<TARGET_FILE:dlcc> ${dlg})
  set_tests_properties(golden_errors_${name} PROPERTIES LABELS golden)
endforeach()
