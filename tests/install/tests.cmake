# `cmake --install` into a temporary prefix and everything a user does with it from outside the
# tree (tests/install/test_install.sh). Not in sanitizer builds: their shared libraries need the
# sanitizer runtime loaded first, which a plain trainer or python3 does not do.
if(DL_SANITIZE)
  return()
endif()
add_test(NAME install_outside_the_tree
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_install.sh ${CMAKE_BINARY_DIR}
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(install_outside_the_tree PROPERTIES LABELS slow TIMEOUT 300)
