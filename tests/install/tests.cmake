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

# samples/e2e_session.sh: the end-to-end session of a new user from this build tree (install to
# a prefix, export a PyTorch ResNet-style CNN to ONNX, import, train with a log, Ctrl-C, resume,
# plot, predict and compare with PyTorch). Exit 77 (skip) when /usr/bin/python3 has no torch.
add_test(NAME e2e_session
         COMMAND bash ${CMAKE_SOURCE_DIR}/samples/e2e_session.sh ${CMAKE_BINARY_DIR})
set_tests_properties(e2e_session PROPERTIES LABELS slow TIMEOUT 300 SKIP_RETURN_CODE 77)
