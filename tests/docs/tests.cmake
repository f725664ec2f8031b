# The documentation's code blocks are tests (tests/docs/run_doc_blocks.py): every `dlg` block must
# pass `dlcc check` (or fail it, when shown as an error), every command of an `sh`/`console` block
# must run with the documented exit status and output, C fragments must compile against the
# headers. One test per document: README.md and every docs/*.md. Not in sanitizer builds: the
# blocks that use the Python binding cannot load an ASan-instrumented libdlrt.so into python3,
# and the gcc stage of tools/test.sh runs them.
if(DL_SANITIZE)
  return()
endif()
file(GLOB DL_DOC_FILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md)
list(PREPEND DL_DOC_FILES ${CMAKE_SOURCE_DIR}/README.md)
foreach(doc ${DL_DOC_FILES})
  get_filename_component(doc_name ${doc} NAME_WE)
  add_test(NAME docs_${doc_name}
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/run_doc_blocks.py
                   --build-dir ${CMAKE_BINARY_DIR} --source-dir ${CMAKE_SOURCE_DIR}
                   --dlcc $<TARGET_FILE:dlcc> --dlcc-cache $<TARGET_FILE:dlcc-cache> ${doc})
  set_tests_properties(docs_${doc_name} PROPERTIES LABELS unit TIMEOUT 240)
endforeach()
# The harness itself: each kind of wrong block (a model that does not check, an error that
# checks, different output, a wrong exit status, an untagged block, a C fragment that does not
# compile, a bad directive, a wrong exit status or path in prose...) must fail with its reason,
# and a document of right blocks must pass.
add_test(NAME docs_harness
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_harness.py ${CMAKE_BINARY_DIR}
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(docs_harness PROPERTIES LABELS unit TIMEOUT 120)
