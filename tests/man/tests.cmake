# The manual pages of man/ (installed into share/man by `cmake --install`; tests/install checks
# that man finds them there). man_pages_options: every option, command, environment variable and
# exit status that dlcc's and dlcc-cache's --help print is in the page, under its command, and
# the pages describe no option the programs lack, so the pages cannot drift from the code.
# man_pages_render: each page renders without a warning (groff -ww; mandoc -Tlint when it is
# installed); skipped (77) without groff.
add_test(NAME man_pages_options
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/check_man.py ${CMAKE_SOURCE_DIR}/man
                 $<TARGET_FILE:dlcc> $<TARGET_FILE:dlcc-cache>)
set_tests_properties(man_pages_options PROPERTIES LABELS unit)
add_test(NAME man_pages_render
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_man_render.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(man_pages_render PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
